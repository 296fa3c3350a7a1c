package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcprl/mcprl/task"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// helperEnv makes the test binary run as an external stdio MCP server.
const helperEnv = "MCPRL_SANDBOX_HELPER_SERVER"

// runHelperServer serves tools that misbehave on purpose: hang (never
// answers, ignores cancellation), crash (the process exits), legacy_error
// (a JSON-RPC error instead of an isError result, like server-postgres 0.6.2).
func runHelperServer() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "helper", Version: "1"}, nil)
	type greetIn struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets someone."}, func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil, nil
	})
	empty := &mcp.Tool{InputSchema: map[string]any{"type": "object"}}
	hang, crash, legacy := *empty, *empty, *empty
	hang.Name, hang.Description = "hang", "Never answers."
	crash.Name, crash.Description = "crash", "Exits the server process."
	legacy.Name, legacy.Description = "legacy_error", "Fails with a JSON-RPC error."
	srv.AddTool(&hang, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { select {} })
	srv.AddTool(&crash, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	srv.AddTool(&legacy, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: `relation "custmers" does not exist`}
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
}

// children lists the processes whose parent is this test process.
func children(t testing.TB) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me := strconv.Itoa(os.Getpid())
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == me {
			out = append(out, pid)
		}
	}
	return out
}

// waitNoChildren fails unless every child process is gone within a few seconds.
func waitNoChildren(t testing.TB) {
	t.Helper()
	var left []int
	for i := 0; i < 100; i++ {
		if left = children(t); len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("child processes left: %v", left)
}

// npmBin finds an npm binary of testdata/npm: missing, the test skips
// locally and fails under CI.
func npmBin(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "testdata", "npm", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed: run scripts/test-setup.sh (npm ci in testdata/npm)", name)
		}
		t.Skipf("%s is not installed (cd testdata/npm && npm ci)", name)
	}
	return p
}

func TestExternalMisbehavingServer(t *testing.T) {
	fx := customersWith(t, fmt.Sprintf(`tools: [query_database]
mcp_servers:
  - name: helper
    command: [%q, "-test.run=^$"]
    env: {%s: "1"}
`, os.Args[0], helperEnv))
	f := newFactory(t, fx, Options{CallTimeout: 300 * time.Millisecond})
	want := []string{"crash", "greet", "hang", "legacy_error", task.ToolQueryDatabase}
	if got := strings.Join(f.toolNames(), ","); got != strings.Join(want, ",") {
		t.Fatalf("catalog %s, want %v", got, want)
	}
	s := fork(t, f)

	if res := call(t, s, "greet", `{"name": "ada"}`); res.IsError || ResultText(res) != "hello ada" {
		t.Errorf("greet: %v %q", res.IsError, ResultText(res))
	}
	res := call(t, s, "legacy_error", `{}`)
	if !res.IsError || !strings.Contains(ResultText(res), `relation "custmers" does not exist`) {
		t.Errorf("legacy error: %v %q", res.IsError, ResultText(res))
	}
	start := time.Now()
	if res, err := s.Call(context.Background(), "hang", json.RawMessage(`{}`)); err == nil {
		t.Errorf("hung server: got result %v, want an error", res)
	} else if !strings.Contains(err.Error(), "did not answer within") || time.Since(start) > 2*time.Second {
		t.Errorf("hung server: %v after %s", err, time.Since(start))
	}
	if _, err := s.Call(context.Background(), "crash", json.RawMessage(`{}`)); err == nil {
		t.Error("crashed server: no error")
	}
	if _, err := s.Call(context.Background(), "greet", json.RawMessage(`{"name": "x"}`)); err == nil || !strings.Contains(err.Error(), "helper") {
		t.Errorf("call to a dead server: %v", err)
	}
	// The built-in tools do not depend on the external server.
	if n := count(t, s, "SELECT COUNT(*) FROM customers"); n != 36 {
		t.Errorf("count: %d", n)
	}
	s.Close()
	if err := f.Close(); err != nil {
		t.Errorf("Factory.Close: %v", err)
	}
	waitNoChildren(t)
}

// TestExternalHungServerKilled: a server stuck in a tool call is killed,
// with its process group, when the factory closes.
func TestExternalHungServerKilled(t *testing.T) {
	fx := customersWith(t, fmt.Sprintf("mcp_servers:\n  - name: helper\n    command: [%q, \"-test.run=^$\"]\n    env: {%s: \"1\"}\n", os.Args[0], helperEnv))
	f, err := NewFactory(context.Background(), fx, Options{CallTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Fork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Call(context.Background(), "hang", nil); err == nil {
		t.Error("hang answered")
	}
	if len(children(t)) == 0 {
		t.Fatal("no helper process to leak")
	}
	start := time.Now()
	f.Close()
	waitNoChildren(t)
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("closing took %s", d)
	}
}

func TestExternalEverythingStdio(t *testing.T) {
	bin := npmBin(t, "mcp-server-everything")
	fx := customersWith(t, fmt.Sprintf("mcp_servers:\n  - name: everything\n    command: [%q, stdio]\n", bin))
	f := newFactory(t, fx, Options{})
	checkEverything(t, f)
	f.Close()
	waitNoChildren(t)
}

func TestExternalEverythingHTTP(t *testing.T) {
	bin := npmBin(t, "mcp-server-everything")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	// Node starts in well under a second on a quiet machine; a loaded one
	// (a test suite beside an experiment) has taken over 10 s.
	for deadline := time.Now().Add(60 * time.Second); ; {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %d within 60 s", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fx := customersWith(t, fmt.Sprintf("mcp_servers:\n  - name: everything\n    url: %s\n", url))
	checkEverything(t, newFactory(t, fx, Options{}))
}

// checkEverything checks that server-everything's tools joined the catalog
// and that calls reach it from every fork.
func checkEverything(t *testing.T, f *Factory) {
	t.Helper()
	names := f.toolNames()
	if len(names) < 5 || !contains(names, task.ToolQueryDatabase) || !contains(names, task.ToolRunLinter) || !contains(names, "echo") || !contains(names, "get-sum") {
		t.Fatalf("catalog: %v", names)
	}
	for i := 0; i < 2; i++ {
		s := fork(t, f)
		if res := call(t, s, "echo", `{"message": "hi from fork"}`); res.IsError || !strings.Contains(ResultText(res), "hi from fork") {
			t.Errorf("echo: %v %q", res.IsError, ResultText(res))
		}
		if res := call(t, s, "get-sum", `{"a": 2, "b": 40}`); res.IsError || !strings.Contains(ResultText(res), "42") {
			t.Errorf("get-sum: %v %q", res.IsError, ResultText(res))
		}
		if res := call(t, s, "get-sum", `{"a": "two"}`); !res.IsError || ResultText(res) == "" {
			t.Errorf("get-sum with bad arguments: %v %q", res.IsError, ResultText(res))
		}
		if n := count(t, s, "SELECT COUNT(*) FROM customers"); n != 36 {
			t.Errorf("count: %d", n)
		}
		s.Close()
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestExternalGoHTTP: a streamable-HTTP server made with the Go SDK.
func TestExternalGoHTTP(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	type in struct {
		Text string `json:"text" jsonschema:"the note"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "shout", Description: "Upper-cases a note."}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(a.Text)}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()
	f := newFactory(t, customersWith(t, "mcp_servers:\n  - name: notes\n    url: "+hs.URL+"\n"), Options{})
	s := fork(t, f)
	if res := call(t, s, "shout", `{"text": "quiet"}`); res.IsError || ResultText(res) != "QUIET" {
		t.Errorf("shout: %v %q", res.IsError, ResultText(res))
	}
	if res := call(t, s, "shout", `{}`); !res.IsError {
		t.Errorf("shout without text: %q", ResultText(res))
	}
	s.Close()
	f.Close()
	hs.CloseClientConnections()
}

func TestExternalConnectFailure(t *testing.T) {
	_, err := NewFactory(context.Background(), customersWith(t, "mcp_servers:\n  - name: ghost\n    command: [/nonexistent/server]\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("missing server binary: %v", err)
	}
	_, err = NewFactory(context.Background(), customersWith(t, "mcp_servers:\n  - name: ghost\n    url: http://127.0.0.1:1/mcp\n"), Options{ConnectTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("unreachable server: %v", err)
	}
	waitNoChildren(t)
}
