package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/sandbox/lint"
	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/task"
)

// ProtocolVersion is the MCP protocol version the sandbox's clients ask for.
// Pinning it skips the SDK's server/discover probe, a wasted round trip
// against servers that only speak the initialize handshake.
const ProtocolVersion = "2025-11-25"

// DefaultCallTimeout bounds one Sandbox.Call when Options.CallTimeout is zero.
const DefaultCallTimeout = 30 * time.Second

// Options configures a Factory.
type Options struct {
	// DSN selects the database: "" is embedded SQLite, a postgres:// DSN
	// uses PostgreSQL (see package sqldb).
	DSN string
	// CallTimeout bounds one tool call end to end; a server that does not
	// answer in time ends that call with an error (DefaultCallTimeout when zero).
	CallTimeout time.Duration
	// ConnectTimeout bounds connecting each external MCP server (30s when zero).
	ConnectTimeout time.Duration
	// Logger receives the SDK's diagnostics and the sandbox's warnings: a
	// database fork that lost its connection and was replaced, a limit the
	// database server would not apply (discarded when nil).
	Logger *slog.Logger
	// SDKPipe connects each sandbox's client and server with the SDK's
	// mcp.NewInMemoryTransports (a byte stream over net.Pipe) instead of the
	// message-passing in-memory transport of this package (see
	// BenchmarkToolsCall for the difference).
	SDKPipe bool
}

// Factory makes sandboxes for one fixture. It is safe for concurrent use.
type Factory struct {
	fx        *task.Fixture
	opts      Options
	tmpl      *sqldb.Template
	linter    *lint.Linter
	dialect   string
	enabled   map[string]bool // built-in tools to serve
	externals []*external
	builtin   map[string]*mcp.Tool // definitions of the built-in tools
	cache     *mcp.SchemaCache
	client    *mcp.Client
	tools     []*mcp.Tool // the catalog, as tools/list gives it

	mu     sync.Mutex
	open   map[*Sandbox]struct{}
	closed bool
}

// NewFactory prepares the fixture: its database template, its workspace and
// its external MCP servers. Nothing is started per trajectory until Fork.
func NewFactory(ctx context.Context, fx *task.Fixture, opts Options) (_ *Factory, err error) {
	if fx == nil {
		return nil, errors.New("sandbox: nil fixture")
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Factory{
		fx:      fx,
		opts:    opts,
		cache:   mcp.NewSchemaCache(),
		open:    map[*Sandbox]struct{}{},
		enabled: map[string]bool{},
		dialect: "SQLite",
	}
	if opts.DSN != "" {
		f.dialect = "PostgreSQL"
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	f.client = mcp.NewClient(&mcp.Implementation{Name: "mcprl", Version: "0"}, &mcp.ClientOptions{
		Logger:       opts.Logger,
		Capabilities: &mcp.ClientCapabilities{}, // no roots, sampling or elicitation
	})

	external := map[string]bool{}
	for _, spec := range fx.Config.MCPServers {
		e, err := connectExternal(ctx, f.client, fx.Dir, spec, opts.ConnectTimeout)
		if err != nil {
			return nil, err
		}
		f.externals = append(f.externals, e)
		for _, t := range e.tools {
			external[t.Name] = true
		}
	}
	if len(fx.Config.Tools) == 0 {
		f.enabled[task.ToolQueryDatabase], f.enabled[task.ToolRunLinter] = true, true
	}
	for _, name := range fx.Config.Tools {
		switch {
		case name == task.ToolQueryDatabase || name == task.ToolRunLinter:
			f.enabled[name] = true
		case external[name]:
		default:
			return nil, fmt.Errorf("sandbox: fixture %s enables unknown tool %q (built in: %s, %s)", fx.Name, name, task.ToolQueryDatabase, task.ToolRunLinter)
		}
	}
	for _, e := range f.externals {
		for _, t := range e.tools {
			if t.Name == task.ToolQueryDatabase || t.Name == task.ToolRunLinter {
				return nil, fmt.Errorf("sandbox: external server %s offers tool %q, which is built in", e.name, t.Name)
			}
		}
	}

	lim := fx.Config.Limits
	f.tmpl, err = sqldb.NewTemplate(ctx, fx.SchemaSQL, fx.DataSQL, sqldb.Options{
		DSN: opts.DSN, StatementTimeout: lim.QueryTimeout, MaxRows: lim.MaxRows, MaxBytes: lim.MaxBytes,
		MaxMemory: lim.MaxMemory, Logger: opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: fixture %s: %w", fx.Name, err)
	}
	var cmds []lint.Command
	for _, l := range fx.Config.Linters {
		cmds = append(cmds, lint.Command{Pattern: l.Pattern, Argv: l.Command, Timeout: l.Timeout})
	}
	f.linter, err = lint.New(fx.WorkspaceDir, lint.Options{Commands: cmds})
	if err != nil {
		return nil, fmt.Errorf("sandbox: fixture %s: %w", fx.Name, err)
	}

	if f.builtin, err = f.builtinTools(); err != nil {
		return nil, err
	}
	// The catalog is what a client sees: list it once through a real session.
	f.tools, err = f.listTools(ctx)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// listTools runs tools/list against a server that has no database behind it.
func (f *Factory) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	srv := f.newServer(oneDB(nil), 0, nil)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, fmt.Errorf("sandbox: listing tools: %w", err)
	}
	defer ss.Close()
	cs, err := f.client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("sandbox: listing tools: %w", err)
	}
	defer cs.Close()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("sandbox: listing tools: %w", err)
		}
		if def, ok := f.builtin[t.Name]; ok {
			// The client decodes schemas into maps, which sort keys; keep the
			// built-in schemas in their wire order (type, properties,
			// required, ...) for prompts and chat templates.
			raw, err := json.Marshal(def.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("sandbox: %s schema: %w", t.Name, err)
			}
			t.InputSchema = json.RawMessage(raw)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// Tools returns the catalog: every tool a sandbox of this factory serves, as
// tools/list gives it (sorted by name). The built-in tools' InputSchema is a
// json.RawMessage in wire key order; external tools' schemas are the maps the
// SDK client decodes. The slice is shared; do not modify it.
func (f *Factory) Tools() []*mcp.Tool { return f.tools }

// Fixture returns the fixture the factory was made for.
func (f *Factory) Fixture() *task.Fixture { return f.fx }

// Serve serves a sandbox over t (for example &mcp.StdioTransport{}) with a
// database fork of its own, until the client disconnects or ctx ends.
func (f *Factory) Serve(ctx context.Context, t mcp.Transport) error {
	db, err := f.tmpl.Fork(ctx)
	if err != nil {
		return fmt.Errorf("sandbox: forking database: %w", err)
	}
	defer db.Close()
	if err := f.newServer(oneDB(db), f.opts.CallTimeout, nil).Run(ctx, t); err != nil && ctx.Err() == nil {
		return fmt.Errorf("sandbox: serving: %w", err)
	}
	return nil
}

// Fork gives one trajectory its own database fork and MCP server, connected
// through an in-memory MCP client session.
func (f *Factory) Fork(ctx context.Context) (*Sandbox, error) {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, errors.New("sandbox: factory is closed")
	}
	db, err := f.tmpl.Fork(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox: forking database: %w", err)
	}
	return f.connect(ctx, db)
}

// Fork returns a new sandbox in this one's state as it is now: a fork of
// its database fork (sqldb.DB.Fork) behind a server of its own, so a
// trajectory can branch at a turn. The two are isolated both ways. The
// workspace is read-only to the tools and shared; external servers are the
// factory's, shared as by every fork.
func (s *Sandbox) Fork(ctx context.Context) (*Sandbox, error) {
	return s.branch(ctx, s.db.Fork, false)
}

// Snapshot returns a new sandbox in this one's state as it is now, as Fork
// does, for a state kept to be forked later (a branching point): its
// database is a sqldb.DB.Snapshot, which on PostgreSQL takes no connection
// or slot schema until it is used, and its MCP server and client session
// are made on first use (Session, a call that goes over MCP), not at once:
// a snapshot that is only forked never has them.
func (s *Sandbox) Snapshot(ctx context.Context) (*Sandbox, error) {
	return s.branch(ctx, s.db.Snapshot, true)
}

func (s *Sandbox) branch(ctx context.Context, fork func(context.Context) (*sqldb.DB, error), lazy bool) (*Sandbox, error) {
	if s.closed.Load() {
		return nil, errors.New("sandbox: fork of a closed sandbox")
	}
	db, err := fork(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox: forking database: %w", err)
	}
	if lazy {
		return s.f.adopt(&Sandbox{f: s.f, db: db, builtins: s.f.builtinHandlers(oneDB(db))})
	}
	return s.f.connect(ctx, db)
}

// connect puts db behind a new MCP server, connected through an in-memory
// client session; db is closed on failure.
func (f *Factory) connect(ctx context.Context, db *sqldb.DB) (*Sandbox, error) {
	s := &Sandbox{f: f, db: db, builtins: f.builtinHandlers(oneDB(db))}
	if _, err := s.session(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return f.adopt(s)
}

// session returns the sandbox's MCP client session, made (with its server)
// on first use.
func (s *Sandbox) session(ctx context.Context) (*mcp.ClientSession, error) {
	s.wire.Lock()
	defer s.wire.Unlock()
	if s.cs != nil {
		return s.cs, nil
	}
	if s.closed.Load() {
		return nil, errors.New("sandbox: closed")
	}
	f := s.f
	srv := f.newServer(oneDB(s.db), 0, nil)
	st, ct := newMemTransports()
	if f.opts.SDKPipe {
		st, ct = mcp.NewInMemoryTransports()
	}
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, fmt.Errorf("sandbox: starting server: %w", err)
	}
	cs, err := f.client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		ss.Close()
		return nil, fmt.Errorf("sandbox: connecting client: %w", err)
	}
	s.ss, s.cs = ss, cs
	return cs, nil
}

// adopt counts s among the factory's open sandboxes (Factory.Close closes
// them), or closes it if the factory is closed.
func (f *Factory) adopt(s *Sandbox) (*Sandbox, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		s.Close()
		return nil, errors.New("sandbox: factory is closed")
	}
	f.open[s] = struct{}{}
	f.mu.Unlock()
	return s, nil
}

// Close closes every sandbox still open, disconnects the external servers
// (their processes are killed), and drops the database template.
func (f *Factory) Close() error {
	f.mu.Lock()
	f.closed = true
	open := make([]*Sandbox, 0, len(f.open))
	for s := range f.open {
		open = append(open, s)
	}
	f.mu.Unlock()
	var errs []error
	for _, s := range open {
		errs = append(errs, s.Close())
	}
	for _, e := range f.externals {
		errs = append(errs, e.close())
	}
	if f.linter != nil {
		errs = append(errs, f.linter.Close())
	}
	if f.tmpl != nil {
		errs = append(errs, f.tmpl.Close())
	}
	return errors.Join(errs...)
}

// Sandbox is one trajectory's live tool server. Calls may be concurrent.
type Sandbox struct {
	f  *Factory
	db *sqldb.DB
	// The MCP server and client sessions, made under wire: at once by
	// Fork, on first use by a Snapshot's (see session); nil until then.
	wire sync.Mutex
	ss   *mcp.ServerSession
	cs   *mcp.ClientSession
	// builtins are the built-in tools' handlers on this sandbox's fork,
	// which Call runs in process (see callBuiltin).
	builtins map[string]mcp.ToolHandler
	closed   atomic.Bool
	once     sync.Once
	err      error
}

// Tools returns the catalog this sandbox serves (the factory's).
func (s *Sandbox) Tools() []*mcp.Tool { return s.f.tools }

// DB returns this sandbox's database, for reward oracles.
func (s *Sandbox) DB() *sqldb.DB { return s.db }

// Lost reports why the sandbox's database fork lost its state and was
// replaced by a fresh copy of the fixture in the middle of the trajectory
// (the call that found it got an isError result saying so), or nil if that
// never happened. A trajectory whose database was reset under it is not a
// fair sample of the policy.
func (s *Sandbox) Lost() error { return s.db.Lost() }

// Session returns the MCP client session the sandbox's calls go through.
// A sandbox made by Snapshot makes it now if it has none yet, and returns
// nil if it cannot (the sandbox is closed).
func (s *Sandbox) Session() *mcp.ClientSession {
	cs, err := s.session(context.Background())
	if err != nil {
		return nil
	}
	return cs
}

// Call calls a tool over the sandbox's MCP session. Everything the model
// should read comes back as a result: a tool's own failure, an unknown tool,
// arguments that are not JSON or do not fit the schema (IsError true, with
// text). A non-nil error means the tool server or transport failed: it
// crashed, or did not answer within the call timeout.
func (s *Sandbox) Call(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	var arguments any
	if len(args) > 0 && string(args) != "null" {
		if !json.Valid(args) {
			return ErrorResult(fmt.Sprintf("arguments for %s are not valid JSON: %.200s", name, args)), nil
		}
		arguments = args
	} else {
		arguments = map[string]any{}
	}
	if h := s.builtins[name]; h != nil && !s.f.opts.SDKPipe {
		return s.callBuiltin(ctx, h, name, arguments)
	}
	ctx, cancel := context.WithTimeout(ctx, s.f.opts.CallTimeout)
	defer cancel()
	cs, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: arguments})
	if err == nil {
		return res, nil
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && werr.Code != codeServerFailure {
		// A protocol-level refusal (unknown tool, bad params, a legacy
		// server's error response): the model reads it.
		msg := werr.Message
		if werr.Code == jsonrpc.CodeInvalidParams && strings.HasPrefix(msg, "unknown tool") {
			msg += "; available tools: " + strings.Join(s.f.toolNames(), ", ")
		}
		return ErrorResult(msg), nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("sandbox: tool %s did not answer within %s: %w", name, s.f.opts.CallTimeout, err)
	}
	return nil, fmt.Errorf("sandbox: calling %s: %w", name, err)
}

func (f *Factory) toolNames() []string {
	names := make([]string, len(f.tools))
	for i, t := range f.tools {
		names[i] = t.Name
	}
	return names
}

// Close ends the session and its server and drops the database fork. It
// may be called more than once.
func (s *Sandbox) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		var errs []error
		s.wire.Lock()
		if s.cs != nil {
			errs = append(errs, s.cs.Close())
			if err := s.ss.Wait(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
				errs = append(errs, err)
			}
		}
		s.wire.Unlock()
		errs = append(errs, s.db.Close())
		s.err = errors.Join(errs...)
		s.f.mu.Lock()
		delete(s.f.open, s)
		s.f.mu.Unlock()
	})
	return s.err
}

// ErrorResult is a tool result with IsError set and msg as its text.
func ErrorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}
}

// ResultText is the text of a result as the model reads it: its text
// content joined by newlines, or, when it has none, its structured content
// as JSON.
func ResultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}
