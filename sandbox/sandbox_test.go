package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/internal/pgtest"
	"github.com/mcprl/mcprl/task"
)

const customersDir = "../examples/fixtures/customers"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		runHelperServer() // the test binary doubles as an external MCP server
		return
	}
	os.Exit(m.Run())
}

func loadCustomers(t testing.TB) *task.Fixture {
	t.Helper()
	fx, err := task.LoadFixture(customersDir)
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// customersWith copies the customers fixture with sandboxYAML as its sandbox.yaml.
func customersWith(t testing.TB, sandboxYAML string) *task.Fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "customers")
	if err := os.CopyFS(dir, os.DirFS(customersDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sandbox.yaml"), []byte(sandboxYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	fx, err := task.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

func newFactory(t testing.TB, fx *task.Fixture, opts Options) *Factory {
	t.Helper()
	f, err := NewFactory(context.Background(), fx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("Factory.Close: %v", err)
		}
	})
	return f
}

func fork(t testing.TB, f *Factory) *Sandbox {
	t.Helper()
	s, err := f.Fork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// call calls a tool and fails the test on a transport error.
func call(t testing.TB, s *Sandbox, name, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := s.Call(context.Background(), name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("Call(%s, %s): %v", name, args, err)
	}
	return res
}

// structured decodes a result's structured content into v.
func structured(t testing.TB, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// count runs a one-cell query through the MCP tool and returns the cell.
func count(t testing.TB, s *Sandbox, sql string) int {
	t.Helper()
	res := call(t, s, task.ToolQueryDatabase, fmt.Sprintf(`{"sql": %q}`, sql))
	if res.IsError {
		t.Fatalf("%s: %s", sql, ResultText(res))
	}
	var out struct {
		Columns []string `json:"columns"`
		Rows    [][]any  `json:"rows"`
	}
	structured(t, res, &out)
	if len(out.Rows) != 1 || len(out.Rows[0]) != 1 {
		t.Fatalf("%s: not one cell: %+v", sql, out)
	}
	n, ok := out.Rows[0][0].(float64)
	if !ok {
		t.Fatalf("%s: cell %v (%T) is not a number", sql, out.Rows[0][0], out.Rows[0][0])
	}
	return int(n)
}

// backends runs fn on SQLite and on PostgreSQL.
func backends(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) { fn(t, pgtest.DSN(t)) })
}

func TestCatalog(t *testing.T) {
	f := newFactory(t, loadCustomers(t), Options{})
	tools := f.Tools()
	if len(tools) != 2 || tools[0].Name != task.ToolQueryDatabase || tools[1].Name != task.ToolRunLinter {
		t.Fatalf("catalog: %v", f.toolNames())
	}
	for _, tool := range tools {
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.HasPrefix(string(schema), `{"type":"object","properties":{`) {
			t.Errorf("%s: schema not in wire order: %s", tool.Name, schema)
		}
		var s struct {
			Type       string                       `json:"type"`
			Properties map[string]map[string]string `json:"properties"`
			Required   []string                     `json:"required"`
		}
		if err := json.Unmarshal(schema, &s); err != nil {
			t.Fatal(err)
		}
		arg := map[string]string{task.ToolQueryDatabase: "sql", task.ToolRunLinter: "path"}[tool.Name]
		if s.Type != "object" || s.Properties[arg]["type"] != "string" || s.Properties[arg]["description"] == "" ||
			len(s.Required) != 1 || s.Required[0] != arg {
			t.Errorf("%s: input schema %s", tool.Name, schema)
		}
		if len(tool.Description) < 80 {
			t.Errorf("%s: description too thin for a system prompt: %q", tool.Name, tool.Description)
		}
	}
	if d := tools[0].Description; !strings.Contains(d, "SQLite") || !strings.Contains(d, "200 rows") {
		t.Errorf("query_database description lacks the dialect or row cap: %q", d)
	}
	if d := tools[1].Description; !strings.Contains(d, "inactive_customers.sql") {
		t.Errorf("run_linter description lacks the workspace files: %q", d)
	}
	s := fork(t, f)
	if got := s.Tools(); len(got) != 2 {
		t.Errorf("sandbox catalog: %d tools", len(got))
	}

	only := newFactory(t, customersWith(t, "tools: [query_database]\n"), Options{})
	if names := only.toolNames(); len(names) != 1 || names[0] != task.ToolQueryDatabase {
		t.Errorf("tools: [query_database] gave %v", names)
	}
	if _, err := NewFactory(context.Background(), customersWith(t, "tools: [query_database, shell]\n"), Options{}); err == nil || !strings.Contains(err.Error(), `unknown tool "shell"`) {
		t.Errorf("unknown enabled tool: %v", err)
	}
}

func TestQueryDatabase(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		s := fork(t, newFactory(t, loadCustomers(t), Options{DSN: dsn}))
		if n := count(t, s, "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"); n != 7 {
			t.Errorf("exact inactive count %d, want 7", n)
		}
		if n := count(t, s, "SELECT COUNT(*) FROM customers WHERE LOWER(TRIM(status)) = 'inactive'"); n != 13 {
			t.Errorf("normalized inactive count %d, want 13", n)
		}
		res := call(t, s, task.ToolQueryDatabase, `{"sql": "SELECT id, email FROM customers WHERE id <= 2 ORDER BY id"}`)
		text := ResultText(res)
		if res.IsError || !strings.Contains(text, "id") || !strings.Contains(text, "email") || !strings.Contains(text, "2 rows") {
			t.Errorf("text result:\n%s", text)
		}
		var out struct {
			Columns []string `json:"columns"`
			Rows    [][]any  `json:"rows"`
		}
		structured(t, res, &out)
		if len(out.Columns) != 2 || out.Columns[1] != "email" || len(out.Rows) != 2 || out.Rows[0][0] != float64(1) {
			t.Errorf("structured result: %+v", out)
		}
		// Writes persist within the fork.
		res = call(t, s, task.ToolQueryDatabase, `{"sql": "UPDATE customers SET status = 'inactive' WHERE status IS NULL"}`)
		var upd struct {
			RowsAffected int `json:"rows_affected"`
		}
		structured(t, res, &upd)
		if res.IsError || upd.RowsAffected != 3 {
			t.Errorf("update: %s", ResultText(res))
		}
		if n := count(t, s, "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"); n != 10 {
			t.Errorf("after update: %d, want 10", n)
		}
		// Row cap from sandbox.yaml (max_rows: 200) is reported.
		res = call(t, s, task.ToolQueryDatabase, `{"sql": "SELECT a.id, b.id FROM customers a, customers b"}`)
		var big struct {
			Rows      [][]any `json:"rows"`
			Truncated bool    `json:"truncated"`
		}
		structured(t, res, &big)
		if res.IsError || len(big.Rows) != 200 || !big.Truncated {
			t.Errorf("row cap: %d rows, truncated=%v", len(big.Rows), big.Truncated)
		}
	})
}

// TestRefusals: everything the model gets wrong or tries to escape with
// comes back as an isError result it can read, never as a Go error.
func TestRefusals(t *testing.T) {
	s := fork(t, newFactory(t, loadCustomers(t), Options{}))
	cases := []struct{ tool, args, want string }{
		{"drop_tables", `{}`, `unknown tool "drop_tables"; available tools: query_database, run_linter`},
		{task.ToolQueryDatabase, `{}`, `missing required argument "sql"`},
		{task.ToolQueryDatabase, ``, `missing required argument "sql"`},
		{task.ToolQueryDatabase, `{"sql": 42}`, `argument "sql" must be a string`},
		{task.ToolQueryDatabase, `{"sql": null}`, `argument "sql" must be a string`},
		{task.ToolQueryDatabase, `{"sql": "SELECT 1", "limit": 5}`, `unknown argument "limit": query_database takes only "sql"`},
		{task.ToolQueryDatabase, `["SELECT 1"]`, `arguments must be a JSON object`},
		{task.ToolQueryDatabase, `"SELECT 1"`, `arguments must be a JSON object`},
		{task.ToolQueryDatabase, `{"sql": "SELECT 1"`, `not valid JSON`},
		{task.ToolQueryDatabase, `{"sql": "   "}`, `sql is empty`},
		{task.ToolQueryDatabase, `{"sql": "SELEC 1"}`, `syntax error`},
		{task.ToolQueryDatabase, `{"sql": "SELECT nope FROM customers"}`, `no such column: nope`},
		{task.ToolQueryDatabase, `{"sql": "ATTACH DATABASE '/tmp/x.db' AS x"}`, `refused`},
		{task.ToolQueryDatabase, `{"sql": "PRAGMA writable_schema = ON"}`, `refused`},
		{task.ToolQueryDatabase, `{"sql": "SELECT load_extension('x')"}`, ``},
		{task.ToolQueryDatabase, `{"sql": "VACUUM INTO '/tmp/copy.db'"}`, `refused`},
		{task.ToolRunLinter, `{}`, `missing required argument "path"`},
		{task.ToolRunLinter, `{"file": "x.sql"}`, `unknown argument "file"`},
		{task.ToolRunLinter, `{"path": "../schema.sql"}`, `".." is not allowed`},
		{task.ToolRunLinter, `{"path": "/etc/passwd"}`, `absolute paths are not allowed`},
		{task.ToolRunLinter, `{"path": "missing.sql"}`, `no such file`},
		{task.ToolRunLinter, `{"path": "README"}`, `no such file`},
	}
	for _, c := range cases {
		res, err := s.Call(context.Background(), c.tool, json.RawMessage(c.args))
		if err != nil {
			t.Errorf("%s %s: error %v, want an isError result", c.tool, c.args, err)
			continue
		}
		if !res.IsError || !strings.Contains(ResultText(res), c.want) || ResultText(res) == "" {
			t.Errorf("%s %s: isError=%v %q, want it to contain %q", c.tool, c.args, res.IsError, ResultText(res), c.want)
		}
	}
	// The sandbox still works after all of that.
	if n := count(t, s, "SELECT COUNT(*) FROM customers"); n != 36 {
		t.Errorf("count after refusals: %d", n)
	}
}

func TestRunLinter(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		s := fork(t, newFactory(t, loadCustomers(t), Options{DSN: dsn}))
		type lintOut struct {
			ExitCode int `json:"exit_code"`
			Findings []struct {
				Line    int    `json:"line"`
				Message string `json:"message"`
			} `json:"findings"`
		}
		for _, c := range []struct {
			path  string
			exit  int
			lines []int
		}{
			{"inactive_customers.sql", 0, nil},
			{"report.json", 0, nil},
			{"pipeline.yaml", 0, nil},
			{"cleanup_inactive.sql", 1, []int{5, 7, 9}},
		} {
			res := call(t, s, task.ToolRunLinter, fmt.Sprintf(`{"path": %q}`, c.path))
			var out lintOut
			structured(t, res, &out)
			if res.IsError || out.ExitCode != c.exit || len(out.Findings) != len(c.lines) {
				t.Errorf("%s: isError=%v %+v\n%s", c.path, res.IsError, out, ResultText(res))
				continue
			}
			for i, line := range c.lines {
				if out.Findings[i].Line != line || !strings.Contains(ResultText(res), fmt.Sprintf("%s:%d:", c.path, line)) {
					t.Errorf("%s: finding %d on line %d, want %d", c.path, i, out.Findings[i].Line, line)
				}
			}
			if !strings.Contains(ResultText(res), fmt.Sprintf("exit code %d", c.exit)) {
				t.Errorf("%s: text lacks the exit code:\n%s", c.path, ResultText(res))
			}
		}
		// Schema integrity follows the trajectory's live database.
		call(t, s, task.ToolQueryDatabase, `{"sql": "ALTER TABLE customers ADD COLUMN churn_score INTEGER"}`)
		res := call(t, s, task.ToolRunLinter, `{"path": "inactive_customers.sql"}`)
		var out lintOut
		structured(t, res, &out)
		if out.ExitCode != 1 || !strings.Contains(ResultText(res), "churn_score") {
			t.Errorf("after ALTER: %s", ResultText(res))
		}
	})
}

// TestForkIsolation: concurrent trajectories each change their own fork,
// through the MCP tools, and see only their own changes.
func TestForkIsolation(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		f := newFactory(t, loadCustomers(t), Options{DSN: dsn})
		const n = 8
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 1; i <= n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- isolated(f, i)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		// A fork made afterwards sees the fixture as it was.
		s := fork(t, f)
		if c := count(t, s, "SELECT COUNT(*) FROM customers"); c != 36 {
			t.Errorf("fresh fork sees %d customers, want 36", c)
		}
	})
}

// A sandbox forked mid-trajectory holds the state its parent had then, over
// MCP, and neither sees the other's later calls.
func TestSandboxForkOfFork(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		f := newFactory(t, loadCustomers(t), Options{DSN: dsn})
		parent := fork(t, f)
		call(t, parent, task.ToolQueryDatabase, `{"sql": "DELETE FROM orders WHERE customer_id = 1"}`)
		call(t, parent, task.ToolQueryDatabase, `{"sql": "DELETE FROM customers WHERE id = 1"}`)
		child, err := parent.Fork(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer child.Close()
		if c := count(t, child, "SELECT COUNT(*) FROM customers"); c != 35 {
			t.Errorf("the branch sees %d customers, want its parent's 35", c)
		}
		call(t, child, task.ToolQueryDatabase, `{"sql": "DELETE FROM customers WHERE id = 2 AND id NOT IN (SELECT customer_id FROM orders)"}`)
		call(t, parent, task.ToolQueryDatabase, `{"sql": "UPDATE customers SET country = 'ZZ'"}`)
		if c := count(t, parent, "SELECT COUNT(*) FROM customers WHERE country = 'ZZ'"); c != 35 {
			t.Errorf("the parent: %d customers in ZZ, want 35", c)
		}
		if c := count(t, child, "SELECT COUNT(*) FROM customers WHERE country = 'ZZ'"); c != 0 {
			t.Errorf("the branch sees the parent's later UPDATE: %d", c)
		}
		if got := call(t, child, task.ToolRunLinter, `{"path": "inactive_customers.sql"}`); got.IsError {
			t.Errorf("run_linter in the branch: %s", ResultText(got))
		}
		if err := child.Close(); err != nil {
			t.Error(err)
		}
		if _, err := child.Fork(context.Background()); err == nil {
			t.Error("a closed sandbox forked")
		}
	})
}

// isolated deletes customer i in its own sandbox and checks that it sees
// exactly its own deletion, over several steps.
func isolated(f *Factory, i int) error {
	ctx := context.Background()
	s, err := f.Fork(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	q := func(sql string) (string, error) {
		res, err := s.Call(ctx, task.ToolQueryDatabase, json.RawMessage(fmt.Sprintf(`{"sql": %q}`, sql)))
		if err != nil {
			return "", err
		}
		if res.IsError {
			return "", fmt.Errorf("fork %d: %s: %s", i, sql, ResultText(res))
		}
		b, _ := json.Marshal(res.StructuredContent)
		return string(b), nil
	}
	if _, err := q(fmt.Sprintf("DELETE FROM orders WHERE customer_id = %d", i)); err != nil {
		return err
	}
	if _, err := q(fmt.Sprintf("DELETE FROM customers WHERE id = %d", i)); err != nil {
		return err
	}
	for step := 0; step < 3; step++ {
		got, err := q("SELECT COUNT(*) AS n, SUM(id) AS s FROM customers")
		if err != nil {
			return err
		}
		want := fmt.Sprintf(`"rows":[[35,%d]]`, 36*37/2-i)
		if !strings.Contains(got, want) {
			return fmt.Errorf("fork %d step %d: %s, want %s", i, step, got, want)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func TestCallTimeout(t *testing.T) {
	f := newFactory(t, loadCustomers(t), Options{CallTimeout: 150 * time.Millisecond})
	s := fork(t, f)
	slow := `{"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"}`
	start := time.Now()
	res, err := s.Call(context.Background(), task.ToolQueryDatabase, json.RawMessage(slow))
	if err == nil || !strings.Contains(err.Error(), "did not answer within") {
		t.Fatalf("slow call: %v, %v", res, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("timeout took %s", d)
	}
	// The cancelled statement is interrupted and the sandbox works on.
	if n := count(t, s, "SELECT COUNT(*) FROM customers"); n != 36 {
		t.Errorf("count after timeout: %d", n)
	}
	// The caller's own deadline works the same way.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Call(ctx, task.ToolQueryDatabase, json.RawMessage(slow)); err == nil {
		t.Error("call under an expired context succeeded")
	}
}

func TestCloseTwiceAndAfterFactoryClose(t *testing.T) {
	f, err := NewFactory(context.Background(), loadCustomers(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := f.Fork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s2, err := f.Fork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.Close(); err != nil { // closes s2 too
		t.Fatal(err)
	}
	if _, err := s2.Call(context.Background(), task.ToolQueryDatabase, json.RawMessage(`{"sql": "SELECT 1"}`)); err == nil {
		t.Error("call on a sandbox of a closed factory succeeded")
	}
	if _, err := f.Fork(context.Background()); err == nil {
		t.Error("Fork after Close succeeded")
	}
}

// TestExternalLinter: a linter command from sandbox.yaml runs in the
// workspace and its exit code and findings come back through MCP.
func TestExternalLinter(t *testing.T) {
	fx := customersWith(t, `linters:
  - pattern: "*.txt"
    command: ["sh", "-c", "awk '/TODO/ { printf \"%s:%d: unresolved TODO\\n\", FILENAME, NR; bad = 1 } END { exit bad ? 2 : 0 }' \"$0\""]
    timeout: 2s
  - pattern: "slow.md"
    command: ["sh", "-c", "sleep 10"]
    timeout: 200ms
`)
	for name, content := range map[string]string{"notes.txt": "ok\nTODO: check NULL status\nfine\n", "clean.txt": "all good\n", "slow.md": "x"} {
		if err := os.WriteFile(filepath.Join(fx.WorkspaceDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := fork(t, newFactory(t, fx, Options{}))
	var out struct {
		ExitCode int  `json:"exit_code"`
		TimedOut bool `json:"timed_out"`
		Findings []struct {
			Line int `json:"line"`
		} `json:"findings"`
	}
	res := call(t, s, task.ToolRunLinter, `{"path": "notes.txt"}`)
	structured(t, res, &out)
	if res.IsError || out.ExitCode != 2 || len(out.Findings) != 1 || out.Findings[0].Line != 2 || !strings.Contains(ResultText(res), "notes.txt:2: unresolved TODO") {
		t.Errorf("notes.txt: %+v\n%s", out, ResultText(res))
	}
	res = call(t, s, task.ToolRunLinter, `{"path": "clean.txt"}`)
	out.Findings = nil
	structured(t, res, &out)
	if res.IsError || out.ExitCode != 0 || len(out.Findings) != 0 {
		t.Errorf("clean.txt: %+v\n%s", out, ResultText(res))
	}
	res = call(t, s, task.ToolRunLinter, `{"path": "slow.md"}`)
	structured(t, res, &out)
	if !res.IsError || !out.TimedOut || out.ExitCode == 0 {
		t.Errorf("slow.md: isError=%v %+v\n%s", res.IsError, out, ResultText(res))
	}
	waitNoChildren(t)
}

func TestNoWorkspace(t *testing.T) {
	fx := customersWith(t, "")
	if err := os.RemoveAll(fx.WorkspaceDir); err != nil {
		t.Fatal(err)
	}
	fx.WorkspaceDir = ""
	s := fork(t, newFactory(t, fx, Options{}))
	if res := call(t, s, task.ToolRunLinter, `{"path": "x.sql"}`); !res.IsError || !strings.Contains(ResultText(res), "no workspace") {
		t.Errorf("run_linter without a workspace: %q", ResultText(res))
	}
}
