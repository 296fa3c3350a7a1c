package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/sandbox/lint"
	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/task"
)

// builtinTools defines the built-in tools: name, description, and the input
// schema inferred from QueryArgs and LintArgs.
func (f *Factory) builtinTools() (map[string]*mcp.Tool, error) {
	qs, err := jsonschema.For[QueryArgs](nil)
	if err != nil {
		return nil, fmt.Errorf("sandbox: query_database schema: %w", err)
	}
	ls, err := jsonschema.For[LintArgs](nil)
	if err != nil {
		return nil, fmt.Errorf("sandbox: run_linter schema: %w", err)
	}
	return map[string]*mcp.Tool{
		task.ToolQueryDatabase: {
			Name:        task.ToolQueryDatabase,
			Title:       "Query the database",
			Description: f.queryDescription(),
			InputSchema: qs,
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
		},
		task.ToolRunLinter: {
			Name:        task.ToolRunLinter,
			Title:       "Lint a workspace file",
			Description: f.lintDescription(),
			InputSchema: ls,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
		},
	}, nil
}

// stringArg decodes arguments that must be {"<field>": "<string>"} and
// nothing else; msg says what is wrong, for the model. (The built-in tools
// check their one argument here rather than through generic schema
// validation, which costs a third of a tools/call round trip.)
func stringArg(raw json.RawMessage, tool, field string) (value, msg string) {
	example := fmt.Sprintf(`{"%s": "..."}`, field)
	var args map[string]json.RawMessage
	if len(raw) == 0 || string(raw) == "null" {
		return "", fmt.Sprintf("missing required argument %q: call %s with %s", field, tool, example)
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return "", fmt.Sprintf("arguments must be a JSON object like %s", example)
	}
	for k := range args {
		if k != field {
			return "", fmt.Sprintf("unknown argument %q: %s takes only %q", k, tool, field)
		}
	}
	v, ok := args[field]
	if !ok {
		return "", fmt.Sprintf("missing required argument %q: call %s with %s", field, tool, example)
	}
	if err := json.Unmarshal(v, &value); err != nil || string(v) == "null" {
		return "", fmt.Sprintf("argument %q must be a string, got %.40s", field, v)
	}
	return value, ""
}

// QueryArgs are query_database's arguments.
type QueryArgs struct {
	SQL string `json:"sql" jsonschema:"one SQL statement, e.g. SELECT COUNT(*) FROM customers"`
}

// LintArgs are run_linter's arguments.
type LintArgs struct {
	Path string `json:"path" jsonschema:"path of a workspace file, relative to the workspace root, e.g. schema.sql"`
}

// dbFunc gives a tool call the database it acts on.
type dbFunc func(context.Context, *mcp.CallToolRequest) (*sqldb.DB, error)

// oneDB is the dbFunc of a server with one database fork.
func oneDB(db *sqldb.DB) dbFunc {
	return func(context.Context, *mcp.CallToolRequest) (*sqldb.DB, error) { return db, nil }
}

// newServer builds an MCP server whose built-in tools act on the database
// dbFor gives each call (nil only for listing the catalog) and that proxies
// the external servers' tools. With bound > 0 the server limits every
// tools/call itself and answers every failure as an isError result (for
// clients of Serve and HTTPHandler; a Sandbox bounds its calls on the
// client side and tells a tool's failure from a server's).
func (f *Factory) newServer(dbFor dbFunc, bound time.Duration, opts *mcp.ServerOptions) *mcp.Server {
	so := mcp.ServerOptions{}
	if opts != nil {
		so = *opts
	}
	so.Logger, so.SchemaCache = f.opts.Logger, f.cache
	so.Capabilities = &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcprl-sandbox", Title: "mcprl sandbox: " + f.fx.Name, Version: "0"}, &so)
	hs := f.builtinHandlers(dbFor)
	for _, name := range []string{task.ToolQueryDatabase, task.ToolRunLinter} {
		if h := hs[name]; h != nil {
			srv.AddTool(f.builtin[name], h)
		}
	}
	for _, e := range f.externals {
		for _, t := range e.tools {
			srv.AddTool(t, e.proxy(t.Name))
		}
	}
	if bound <= 0 {
		return srv
	}
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			ctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			res, err := next(ctx, method, req)
			var werr *jsonrpc.Error
			if err != nil && !errors.As(err, &werr) {
				// A client reads why its call failed; a bare Go error
				// would reach it as a JSON-RPC error without a valid code.
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return ErrorResult(fmt.Sprintf("the call did not finish within the %s limit per call: %v", bound, err)), nil
				}
				return ErrorResult(err.Error()), nil
			}
			return res, err
		}
	})
	return srv
}

// builtinHandlers returns the handlers of the enabled built-in tools, each
// acting on the database dbFor gives the call.
func (f *Factory) builtinHandlers(dbFor dbFunc) map[string]mcp.ToolHandler {
	hs := make(map[string]mcp.ToolHandler, 2)
	if f.enabled[task.ToolQueryDatabase] {
		hs[task.ToolQueryDatabase] = func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			sql, msg := stringArg(req.Params.Arguments, task.ToolQueryDatabase, "sql")
			if msg != "" {
				return ErrorResult(msg), nil
			}
			db, err := dbFor(ctx, req)
			if err != nil {
				return nil, err
			}
			return queryDatabase(ctx, db, sql)
		}
	}
	if f.enabled[task.ToolRunLinter] {
		hs[task.ToolRunLinter] = func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			path, msg := stringArg(req.Params.Arguments, task.ToolRunLinter, "path")
			if msg != "" {
				return ErrorResult(msg), nil
			}
			db, err := dbFor(ctx, req)
			if err != nil {
				return nil, err
			}
			return f.runLinter(ctx, db, path)
		}
	}
	return hs
}

func ptr[T any](v T) *T { return &v }

func (f *Factory) queryDescription() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run one SQL statement against the task's %s database and return the result as a table.", f.dialect)
	b.WriteString(" Reads (SELECT) return their rows; writes (INSERT, UPDATE, DELETE, DDL) return the number of rows affected and persist for the rest of this episode.")
	if f.dialect == "SQLite" {
		b.WriteString(" To see the schema: SELECT name, sql FROM sqlite_master WHERE type = 'table'.")
	} else {
		b.WriteString(" To see the schema: SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema().")
	}
	if lim := f.fx.Config.Limits; lim.MaxRows > 0 {
		fmt.Fprintf(&b, " Results are cut after %d rows.", lim.MaxRows)
	}
	b.WriteString(" SQL errors are returned as text.")
	return b.String()
}

func (f *Factory) lintDescription() string {
	var b strings.Builder
	b.WriteString("Lint a file of the task's workspace and report problems as path:line: message, with the linter's exit code (0 = clean, non-zero = problems).")
	b.WriteString(" .sql files: every statement must apply to a scratch copy of the database, and the tables the file creates or uses must match the live database schema.")
	b.WriteString(" .json and .yaml files: syntax.")
	for _, l := range f.fx.Config.Linters {
		fmt.Fprintf(&b, " %s files: %s.", l.Pattern, l.Command[0])
	}
	if files := workspaceFiles(f.fx.WorkspaceDir, 30); len(files) > 0 {
		b.WriteString(" Workspace files: " + strings.Join(files, ", ") + ".")
	}
	return b.String()
}

// workspaceFiles lists up to max regular files of dir, relative and sorted.
func workspaceFiles(dir string, max int) []string {
	if dir == "" {
		return nil
	}
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != dir {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") {
			if rel, err := filepath.Rel(dir, p); err == nil {
				files = append(files, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	sort.Strings(files)
	if len(files) > max {
		files = append(files[:max], "...")
	}
	return files
}

// queryDatabase runs the policy's SQL on its fork. SQL errors, refusals,
// timeouts and a lost fork's replacement are results the model reads; only
// infrastructure failures are errors.
func queryDatabase(ctx context.Context, db *sqldb.DB, sql string) (*mcp.CallToolResult, error) {
	if strings.TrimSpace(sql) == "" {
		return ErrorResult("sql is empty: give one SQL statement"), nil
	}
	r, err := db.Query(ctx, sql)
	if err != nil {
		var qe *sqldb.QueryError
		if errors.As(err, &qe) {
			return ErrorResult(qe.Error()), nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("query cancelled: %w", ctx.Err())
		}
		return nil, fmt.Errorf("database failure: %w", err)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: r.Text()}},
		StructuredContent: r,
	}, nil
}

// runLinter lints a workspace file; refusals are results the model reads.
func (f *Factory) runLinter(ctx context.Context, db *sqldb.DB, path string) (*mcp.CallToolResult, error) {
	r, err := f.linter.Lint(ctx, path, lint.Databases{Scratch: f.tmpl.Fork, Live: db})
	if err != nil {
		var re *lint.RefusalError
		if errors.As(err, &re) {
			return ErrorResult(re.Error()), nil
		}
		return nil, err
	}
	if r.Findings == nil {
		r.Findings = []lint.Finding{} // [] rather than null in structured content
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: r.Text()}},
		StructuredContent: r,
		IsError:           r.TimedOut,
	}, nil
}
