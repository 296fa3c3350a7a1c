package envserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcprl/mcprl/envserver"
	"github.com/mcprl/mcprl/task"
)

const (
	fixturesDir = "../examples/fixtures"
	tasksFile   = "../examples/customers/tasks.jsonl"
)

// newServer starts a server on the example fixtures and tasks behind an
// httptest server; both are closed when the test ends.
func newServer(t testing.TB, opts envserver.Options) (*envserver.Server, *httptest.Server) {
	t.Helper()
	fxs, err := task.LoadFixtures(fixturesDir)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := task.Load(tasksFile, task.LoadOptions{Fixtures: fxs})
	if err != nil {
		t.Fatal(err)
	}
	opts.Fixtures, opts.Tasks = fxs, tasks
	srv, err := envserver.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv, hs
}

// client is a test's WebSocket session.
type client struct {
	t testing.TB
	c *websocket.Conn
}

func dial(t testing.TB, hs *httptest.Server) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	return &client{t: t, c: c}
}

// reply is a server message, decoded.
type reply struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// write sends text.
func (c *client) write(text string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, []byte(text)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// raw sends text and reads the answer.
func (c *client) raw(text string) reply {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, []byte(text)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
	return c.recv(ctx)
}

func (c *client) recv(ctx context.Context) reply {
	c.t.Helper()
	_, b, err := c.c.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var r reply
	if err := json.Unmarshal(b, &r); err != nil {
		c.t.Fatalf("answer is not JSON: %v: %s", err, b)
	}
	return r
}

// send sends {"type": typ, "data": data}.
func (c *client) send(typ string, data any) reply {
	c.t.Helper()
	msg := map[string]any{"type": typ}
	if data != nil {
		msg["data"] = data
	}
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.raw(string(b))
}

// observation sends a message that must be answered with an observation.
func (c *client) observation(typ string, data any) stepResult {
	c.t.Helper()
	r := c.send(typ, data)
	if r.Type != "observation" {
		c.t.Fatalf("%s: got %s %s, want an observation", typ, r.Type, r.Data)
	}
	var s stepResult
	if err := json.Unmarshal(r.Data, &s); err != nil {
		c.t.Fatal(err)
	}
	return s
}

func (c *client) close() { c.c.Close(websocket.StatusNormalClosure, "") }

type stepResult struct {
	Observation map[string]json.RawMessage `json:"observation"`
	Reward      *float64                   `json:"reward"`
	Done        bool                       `json:"done"`
}

type toolResult struct {
	Data              string          `json:"data"`
	IsError           bool            `json:"isError"`
	Content           json.RawMessage `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}

// result decodes a call_tool observation's result (failing on a transport error).
func (s stepResult) result(t testing.TB) toolResult {
	t.Helper()
	if e := s.Observation["error"]; len(e) > 0 && string(e) != "null" {
		t.Fatalf("tool error: %s", e)
	}
	var r toolResult
	if err := json.Unmarshal(s.Observation["result"], &r); err != nil {
		t.Fatalf("result: %v: %s", err, s.Observation["result"])
	}
	return r
}

type errData struct {
	Message string `json:"message"`
	Code    string `json:"code"`
}

func (r reply) err(t testing.TB) errData {
	t.Helper()
	if r.Type != "error" {
		t.Fatalf("got %s %s, want an error", r.Type, r.Data)
	}
	var e errData
	if err := json.Unmarshal(r.Data, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func call(sql string) map[string]any {
	return map[string]any{"type": "call_tool", "tool_name": "query_database", "arguments": map[string]any{"sql": sql}}
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// settle waits until the goroutine count is back to at most base.
func settle(base int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 300 && n > base; i++ {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// newHTTPServer serves srv without closing it at the test's end.
func newHTTPServer(srv *envserver.Server) *httptest.Server { return httptest.NewServer(srv.Handler()) }
