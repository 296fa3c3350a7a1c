package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/task"
)

const customersFixture = "../../examples/fixtures/customers"

// inspectorBin finds the MCP Inspector of testdata/npm: missing, the test
// skips locally and fails under CI.
func inspectorBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../testdata/npm/node_modules/.bin/mcp-inspector")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("MCP Inspector is not installed: run scripts/test-setup.sh (npm ci in testdata/npm)")
		}
		t.Skip("MCP Inspector is not installed (cd testdata/npm && npm ci)")
	}
	return p
}

// buildMcprl builds the mcprl binary into a temp dir.
func buildMcprl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcprl")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// inspect runs the Inspector CLI against target (a command line or URL)
// and decodes its JSON output.
func inspect(t *testing.T, inspector string, target []string, method string, extra ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(append([]string{"--cli"}, target...), append([]string{"--method", method}, extra...)...)
	cmd := exec.CommandContext(ctx, inspector, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspector %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("inspector output: %v\n%s", err, out)
	}
	return v
}

// oracleCount is the expected answer, computed on a fork of the fixture's
// database directly, not through MCP.
func oracleCount(t *testing.T, sql string) float64 {
	t.Helper()
	fx, err := task.LoadFixture(customersFixture)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tmpl, err := sqldb.NewTemplate(ctx, fx.SchemaSQL, fx.DataSQL, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tmpl.Close()
	db, err := tmpl.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Oracle(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r.Rows[0][0])
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatalf("oracle cell %s: %v", b, err)
	}
	return n
}

// TestSandboxServeInspector drives `mcprl sandbox serve` with the official
// MCP Inspector CLI, over stdio and over streamable HTTP.
func TestSandboxServeInspector(t *testing.T) {
	inspector := inspectorBin(t)
	bin := buildMcprl(t)
	const countSQL = "SELECT COUNT(*) AS n FROM customers WHERE LOWER(TRIM(status)) = 'inactive'"
	want := oracleCount(t, countSQL)

	// full: every check (stdio); otherwise the catalog, a query and a lint.
	check := func(t *testing.T, target []string, full bool) {
		list := inspect(t, inspector, target, "tools/list")
		var names []string
		for _, tool := range list["tools"].([]any) {
			names = append(names, tool.(map[string]any)["name"].(string))
		}
		if strings.Join(names, ",") != "query_database,run_linter" {
			t.Errorf("tools/list: %v", names)
		}

		res := inspect(t, inspector, target, "tools/call", "--tool-name", "query_database", "--tool-arg", "sql="+countSQL)
		rows := res["structuredContent"].(map[string]any)["rows"].([]any)
		if got := rows[0].([]any)[0]; got != want || res["isError"] == true {
			t.Errorf("query_database count = %v, want %v: %v", got, want, res)
		}

		for _, c := range []struct {
			path  string
			clean bool
		}{{"inactive_customers.sql", true}, {"cleanup_inactive.sql", false}} {
			if !full && c.clean {
				continue
			}
			res := inspect(t, inspector, target, "tools/call", "--tool-name", "run_linter", "--tool-arg", "path="+c.path)
			sc := res["structuredContent"].(map[string]any)
			code := sc["exit_code"].(float64)
			text := res["content"].([]any)[0].(map[string]any)["text"].(string)
			if c.clean && (code != 0 || !strings.Contains(text, "exit code 0")) {
				t.Errorf("run_linter %s: exit code %v, want 0:\n%s", c.path, code, text)
			}
			if !c.clean && (code == 0 || !strings.Contains(text, c.path+":5:7:")) {
				t.Errorf("run_linter %s: exit code %v, want non-zero with findings:\n%s", c.path, code, text)
			}
		}

		if !full {
			return
		}
		res = inspect(t, inspector, target, "tools/call", "--tool-name", "run_linter", "--tool-arg", "path=../schema.sql")
		if res["isError"] != true {
			t.Errorf("run_linter ../schema.sql was not refused: %v", res)
		}
	}

	t.Run("stdio", func(t *testing.T) {
		check(t, []string{bin, "sandbox", "serve", "--fixture", customersFixture, "--stdio"}, true)
	})

	t.Run("http", func(t *testing.T) {
		cmd := exec.Command(bin, "sandbox", "serve", "--fixture", customersFixture, "--http", "127.0.0.1:0")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve --http did not exit cleanly: %v", err)
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Error("serve --http did not stop on SIGTERM")
			}
		}()
		sc := bufio.NewScanner(stderr)
		var url string
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "http://"); i >= 0 {
				url = strings.TrimSuffix(sc.Text()[i:], "/") + "/mcp"
				break
			}
		}
		if url == "" {
			t.Fatal("serve --http printed no address")
		}
		go func() {
			for sc.Scan() {
			}
		}()
		check(t, []string{url, "--transport", "http"}, false)
	})
}

func TestSandboxServeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sandbox", "serve", "--fixture", customersFixture},
		{"sandbox", "serve", "--fixture", customersFixture, "--stdio", "--http", "127.0.0.1:0"},
		{"sandbox", "serve", "--stdio"},
		{"sandbox", "serve", "--fixture", "/nonexistent", "--stdio"},
	} {
		cmd := newRootCmd()
		cmd.SetArgs(args)
		cmd.SetOut(new(strings.Builder))
		cmd.SetErr(new(strings.Builder))
		if err := cmd.Execute(); err == nil {
			t.Errorf("%s: no error", strings.Join(args, " "))
		}
	}
}
