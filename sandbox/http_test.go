package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/internal/pgtest"
	"github.com/mcprl/mcprl/task"
)

// serveHTTP starts f's HTTP handler on a test server and returns a connect
// function for clients.
func serveHTTP(t *testing.T, f *Factory, opts HTTPOptions) func() (*mcp.ClientSession, error) {
	connect, _ := serveHTTPAt(t, f, opts)
	return connect
}

func serveHTTPAt(t *testing.T, f *Factory, opts HTTPOptions) (func() (*mcp.ClientSession, error), string) {
	t.Helper()
	h, closeSessions := f.HTTPHandler(opts)
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.Close()
		if err := closeSessions(); err != nil {
			t.Errorf("closing sessions: %v", err)
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	return func() (*mcp.ClientSession, error) {
		return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil)
	}, hs.URL
}

func sqlCall(cs *mcp.ClientSession, sql string) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: task.ToolQueryDatabase, Arguments: map[string]any{"sql": sql}})
}

func firstCell(t *testing.T, res *mcp.CallToolResult, err error) any {
	t.Helper()
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	return res.StructuredContent.(map[string]any)["rows"].([]any)[0].([]any)[0]
}

// Each HTTP session has its own fork: one client neither sees another's
// changes nor waits on its slow statements.
func TestHTTPSessionForks(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		f := newFactory(t, loadCustomers(t), Options{DSN: dsn, CallTimeout: 1500 * time.Millisecond})
		connect := serveHTTP(t, f, HTTPOptions{})
		a, err := connect()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := connect()
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if res, err := sqlCall(a, "DELETE FROM orders"); err != nil || res.IsError {
			t.Fatalf("delete: %v %v", err, res)
		}
		res, err := sqlCall(b, "SELECT COUNT(*) FROM orders")
		if got := firstCell(t, res, err); got != float64(40) {
			t.Errorf("session b sees %v orders after a's DELETE, want 40", got)
		}
		// a's slow statement does not hold b up.
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sqlCall(a, slowStatement(dsn))
			if err != nil || !res.IsError || !strings.Contains(ResultText(res), "timed out") {
				t.Errorf("slow statement: %v %v, want an isError timeout", err, res)
			}
		}()
		time.Sleep(200 * time.Millisecond)
		start := time.Now()
		res, err = sqlCall(b, "SELECT 1")
		firstCell(t, res, err)
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("SELECT 1 in session b took %s while a ran a slow statement", d)
		}
		wg.Wait()
		// The deadline ended a's statement cleanly: its fork goes on.
		res, err = sqlCall(a, "SELECT COUNT(*) FROM orders")
		if got := firstCell(t, res, err); got != float64(0) {
			t.Errorf("session a sees %v orders after its DELETE and a timeout, want 0", got)
		}
	})
}

func slowStatement(dsn string) string {
	if dsn == "" {
		return "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
	}
	return "SELECT pg_sleep(60)"
}

// Idle sessions are closed with their forks; sessions beyond the cap are
// refused with a JSON-RPC error, and a freed place can be taken again.
func TestHTTPSessionTimeoutAndCap(t *testing.T) {
	f := newFactory(t, loadCustomers(t), Options{})
	connect, url := serveHTTPAt(t, f, HTTPOptions{SessionTimeout: 300 * time.Millisecond, MaxSessions: 2})
	a, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	res, err := sqlCall(a, "SELECT 1")
	firstCell(t, res, err)
	if n := f.tmpl.OpenForks(); n != 1 {
		t.Fatalf("%d forks open after one session's call, want 1", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.tmpl.OpenForks() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := f.tmpl.OpenForks(); n != 0 {
		t.Errorf("%d forks open after the session sat idle past its timeout", n)
	}
	a.Close()

	b, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	c, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	if _, err = connect(); err == nil {
		t.Fatalf("a third session under a cap of 2 was opened")
	}
	// What any client reads: HTTP 503 with a JSON-RPC error for its request.
	init := `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(init))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || body.ID != 7 || body.Error.Code != codeTooManySessions || !strings.Contains(body.Error.Message, "too many sessions") {
		t.Errorf("a third session under a cap of 2: HTTP %d %+v %v", resp.StatusCode, body, err)
	}
	b.Close()
	d, err := connect()
	if err != nil {
		t.Fatalf("a session after one closed: %v", err)
	}
	res, err = sqlCall(d, "SELECT 1")
	firstCell(t, res, err)
	c.Close()
	d.Close()
}

// PostgreSQL over HTTP: a call timeout shorter than the statement timeout
// (--call-timeout 1s and pg_sleep(60)) and a connection killed under the
// fork both leave the sandbox working; the kill is logged and reported.
func TestHTTPPostgresForkSurvives(t *testing.T) {
	dsn := pgtest.DSN(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f := newFactory(t, loadCustomers(t), Options{DSN: dsn, CallTimeout: time.Second, Logger: logger})
	connect := serveHTTP(t, f, HTTPOptions{})
	cs, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := sqlCall(cs, "DELETE FROM orders WHERE id = 1"); err != nil || res.IsError {
		t.Fatalf("delete: %v %v", err, res)
	}
	for range 3 {
		start := time.Now()
		res, err := sqlCall(cs, "SELECT pg_sleep(60)")
		if err != nil || !res.IsError || !strings.Contains(ResultText(res), "timed out") {
			t.Fatalf("pg_sleep(60) under a 1s call timeout: %v %v", err, res)
		}
		if d := time.Since(start); d > 1100*time.Millisecond {
			t.Errorf("pg_sleep(60) under a 1s call timeout returned after %s", d)
		}
	}
	res, err := sqlCall(cs, "SELECT COUNT(*) FROM orders")
	if got := firstCell(t, res, err); got != float64(39) {
		t.Errorf("%v orders after timeouts, want 39 (the session's DELETE kept)", got)
	}
	// Kill the fork's connection from outside.
	res, err = sqlCall(cs, "SELECT pg_backend_pid()")
	pid := firstCell(t, res, err)
	admin, err := pgconn.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), fmt.Sprintf("SELECT pg_terminate_backend(%v)", pid)).ReadAll(); err != nil {
		t.Fatal(err)
	}
	res, err = sqlCall(cs, "SELECT COUNT(*) FROM orders")
	if err != nil || !res.IsError || !strings.Contains(ResultText(res), "initial state") {
		t.Fatalf("call on a killed connection: %v %v, want an isError result saying the database was reset", err, res)
	}
	res, err = sqlCall(cs, "SELECT COUNT(*) FROM orders")
	if got := firstCell(t, res, err); got != float64(40) {
		t.Errorf("%v orders after the reset, want the fixture's 40", got)
	}
	if !strings.Contains(logs.String(), "fork lost") {
		t.Errorf("the lost fork was not logged; log:\n%s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
