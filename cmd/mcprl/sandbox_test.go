package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// testBinary is the mcprl binary the tests run, built once per test
// process (a build takes minutes on a loaded machine).
var testBinary struct {
	once      sync.Once
	dir, path string
	err       error
}

// TestMain removes the test binary after the tests. The commands run on simplego (GOMLX_BACKEND=go, which
// their default engine, auto, follows) unless $GOMLX_BACKEND says otherwise: XLA compiles every graph shape,
// which would multiply this package's time; engine_test.go runs the commands on XLA.
func TestMain(m *testing.M) {
	if os.Getenv("GOMLX_BACKEND") == "" {
		os.Setenv("GOMLX_BACKEND", "go")
	}
	code := m.Run()
	if testBinary.dir != "" {
		os.RemoveAll(testBinary.dir)
	}
	os.Exit(code)
}

// buildMcprl builds the mcprl binary (once) and returns its path.
func buildMcprl(t *testing.T) string {
	t.Helper()
	testBinary.once.Do(func() {
		if testBinary.dir, testBinary.err = os.MkdirTemp("", "mcprl-test-bin"); testBinary.err != nil {
			return
		}
		testBinary.path = filepath.Join(testBinary.dir, "mcprl")
		out, err := exec.Command("go", "build", "-o", testBinary.path, ".").CombinedOutput()
		if err != nil {
			testBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if testBinary.err != nil {
		t.Fatal(testBinary.err)
	}
	return testBinary.path
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
		url := startServeHTTP(t, exec.Command(bin, "sandbox", "serve", "--fixture", customersFixture, "--http", "127.0.0.1:0"))
		check(t, []string{url, "--transport", "http"}, false)
	})
}

// startServeHTTP starts `mcprl sandbox serve --http` and returns the MCP
// endpoint it prints; the server is stopped with SIGTERM when the test ends.
func startServeHTTP(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
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
	})
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
	return url
}

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSandboxServeHTTPGuards: --http with a bare port listens on loopback;
// --token-env requires the token on every request; binding beyond loopback
// prints a warning.
func TestSandboxServeHTTPGuards(t *testing.T) {
	bin := buildMcprl(t)
	t.Run("loopback and token", func(t *testing.T) { testServeLoopbackAndToken(t, bin) })
	t.Run("warning off loopback", func(t *testing.T) { testServeWarnsOffLoopback(t, bin) })
}

func testServeLoopbackAndToken(t *testing.T, bin string) {
	cmd := exec.Command(bin, "sandbox", "serve", "--fixture", customersFixture, "--http", ":0", "--token-env", "MCPRL_TEST_TOKEN")
	cmd.Env = append(os.Environ(), "MCPRL_TEST_TOKEN=s3cret")
	url := startServeHTTP(t, cmd)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("--http :0 serves at %s, want loopback", url)
	}
	ctx := context.Background()
	connect := func(token string) (*mcp.ClientSession, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	}
	if _, err := connect("wrong"); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("a wrong token: %v, want Unauthorized", err)
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: HTTP %d, want 401", resp.StatusCode)
	}
	cs, err := connect("s3cret")
	if err != nil {
		t.Fatalf("the right token: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query_database", Arguments: map[string]any{"sql": "SELECT COUNT(*) FROM orders"}})
	if err != nil || res.IsError {
		t.Fatalf("query with the token: %v %v", err, res)
	}
}

func testServeWarnsOffLoopback(t *testing.T, bin string) {
	cmd := exec.Command(bin, "sandbox", "serve", "--fixture", customersFixture, "--http", "0.0.0.0:0")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "serving fixture") {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		for sc.Scan() {
		}
	}()
	cmd.Wait()
	if !strings.Contains(stderr.String(), "warning: serving on 0.0.0.0:") || !strings.Contains(stderr.String(), "without authentication") {
		t.Errorf("0.0.0.0: stderr %q, want a warning", stderr.String())
	}
}

func TestSandboxServeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sandbox", "serve", "--fixture", customersFixture},
		{"sandbox", "serve", "--fixture", customersFixture, "--stdio", "--http", "127.0.0.1:0"},
		{"sandbox", "serve", "--stdio"},
		{"sandbox", "serve", "--fixture", customersFixture, "--http", ":0", "--token-env", "MCPRL_UNSET_TOKEN_VARIABLE"},
		{"sandbox", "serve", "--fixture", customersFixture, "--stdio", "--token-env", "HOME"},
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
