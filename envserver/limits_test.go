package envserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/envserver"
	"github.com/mcprl/mcprl/toolcall"
)

// endless is a query that runs until its call's timeout.
const endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"

// completionOf writes n calls of sql as a model would.
func completionOf(n int, sql string) string {
	args, _ := json.Marshal(map[string]string{"sql": sql})
	var b strings.Builder
	for range n {
		b.WriteString(toolcall.RenderCall(chat.Call{Name: "query_database", Arguments: args}))
		b.WriteString("\n")
	}
	b.WriteString("There are 0 inactive customers.")
	return b.String()
}

// TestFinishReplayCapped: a replay runs at most MaxReplayCalls calls; the
// rest are not run and the episode is scored as truncated.
func TestFinishReplayCapped(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{MaxReplayCalls: 3})
	c := dial(t, hs)
	defer c.close()
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	fin := c.observation("step", map[string]any{"type": "finish", "completion": completionOf(10, "SELECT 1"), "replay": true})
	var obs envserver.FinishObservation
	raw, _ := json.Marshal(fin.Observation)
	json.Unmarshal(raw, &obs)
	if obs.ToolCalls != 3 || !obs.Truncated || !fin.Done {
		t.Fatalf("10 calls replayed under a cap of 3: %s", raw)
	}
	if s := srv.Stats(); s.ToolCalls != 3 {
		t.Fatalf("stats %+v, want 3 calls run", s)
	}
}

// TestFinishBounded: issue 29's replay of slow queries ends at the
// server's finish timeout, with an error naming it.
func TestFinishBounded(t *testing.T) {
	_, hs := newServer(t, envserver.Options{FinishTimeout: 500 * time.Millisecond, CallTimeout: 5 * time.Second})
	c := dial(t, hs)
	defer c.close()
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	start := time.Now()
	r := c.send("step", map[string]any{"type": "finish", "completion": completionOf(10, endless), "replay": true})
	e := r.err(t)
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("finish answered after %v, finish timeout 500ms (ten calls of 5 s each)", el)
	}
	if e.Code != envserver.CodeExecution || !strings.Contains(e.Message, "--finish-timeout") {
		t.Errorf("error %+v, want one naming --finish-timeout", e)
	}
	// The session goes on.
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
}

// TestFinishCancelledOnDisconnect: a client that drops while its replay
// runs stops the replay: the running call is cancelled, no further call
// starts, and its fork is freed at once.
func TestFinishCancelledOnDisconnect(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{CallTimeout: 3 * time.Second})
	c := dial(t, hs)
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	msg, _ := json.Marshal(map[string]any{"type": "step", "data": map[string]any{"type": "finish", "completion": completionOf(10, endless), "replay": true}})
	c.write(string(msg))
	time.Sleep(300 * time.Millisecond) // the first call runs
	c.c.CloseNow()
	start := time.Now()
	if !waitFor(10*time.Second, func() bool { s := srv.Stats(); return s.OpenForks == 0 && s.ActiveSessions == 0 }) {
		t.Fatalf("a vanished client's replay kept its fork: %+v", srv.Stats())
	}
	if el := time.Since(start); el > 2500*time.Millisecond {
		t.Errorf("fork freed %v after the client left (a call takes 3 s, the replay 30 s)", el)
	}
}

// TestInlineAssertionsCapped: a task given inline with more assertions
// than the server's limit, or a broken one, is refused at reset.
func TestInlineAssertionsCapped(t *testing.T) {
	_, hs := newServer(t, envserver.Options{MaxAssertions: 2})
	c := dial(t, hs)
	defer c.close()
	r := c.send("reset", map[string]any{"task": "q", "fixture": "customers", "ground_truth_assertions": []string{"SELECT 1", "SELECT 1", "SELECT 1"}})
	if e := r.err(t); e.Code != envserver.CodeValidation || !strings.Contains(e.Message, "limit of 2") {
		t.Fatalf("3 assertions under a cap of 2: %+v", e)
	}
	c.observation("reset", map[string]any{"task": "q", "fixture": "customers", "ground_truth_assertions": []string{"SELECT 1", "SELECT 1"}})
	// A broken one is refused at reset, not at finish.
	r = c.send("reset", map[string]any{"task": "q", "fixture": "customers", "ground_truth_assertions": []string{"SELECT 1", "exit_code =="}})
	if e := r.err(t); e.Code != envserver.CodeValidation || !strings.Contains(e.Message, "ground_truth_assertions[1]") {
		t.Fatalf("a broken inline assertion: %+v", e)
	}
}

// TestMCPRefusesCrossSite: issue 29's cross-site POST /mcp (text/plain, a
// foreign Origin or Host) is refused without running the call.
func TestMCPRefusesCrossSite(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{})
	body := `{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"fixture": "customers", "name": "query_database", "arguments": {"sql": "SELECT 1"}}}`
	for _, tc := range []struct {
		contentType, origin, host string
		want                      int
	}{
		{"text/plain", "", "", http.StatusUnsupportedMediaType},
		{"", "", "", http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", "", "", http.StatusUnsupportedMediaType},
		{"application/json", "http://evil.example", "", http.StatusForbidden},
		{"text/plain", "http://evil.example", "", http.StatusForbidden},
		{"application/json", "", "evil.example", http.StatusForbidden},
		{"application/json; charset=utf-8", "", "", http.StatusOK},
		{"application/json", hs.URL, "", http.StatusOK},
	} {
		before := srv.Stats().ToolCalls
		req, _ := http.NewRequest("POST", hs.URL+"/mcp", strings.NewReader(body))
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ran := srv.Stats().ToolCalls - before
		if resp.StatusCode != tc.want || (tc.want == http.StatusOK) != (ran == 1) {
			t.Errorf("Content-Type %q Origin %q Host %q: %d (%d calls run) %s, want %d", tc.contentType, tc.origin, tc.host, resp.StatusCode, ran, b, tc.want)
		}
	}
}

// TestHTTPSessionsLeaveRoomForWebSockets: sessions made over /mcp, held by
// no connection, take half the slots at most.
func TestHTTPSessionsLeaveRoomForWebSockets(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{MaxSessions: 4})
	create := func() string {
		resp, err := http.Post(hs.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for i := range 2 {
		if r := create(); !strings.Contains(r, "session_id") {
			t.Fatalf("session %d: %s", i, r)
		}
	}
	if r := create(); !strings.Contains(r, "capacity") {
		t.Fatalf("third /mcp session of 4 slots: %s", r)
	}
	a, b := dial(t, hs), dial(t, hs)
	defer a.close()
	defer b.close()
	a.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	b.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	if s := srv.Stats(); s.ActiveSessions != 4 {
		t.Fatalf("stats %+v", s)
	}
}

// TestHugeFrameRefused: a frame declaring 2^62 bytes ends its connection
// when its header arrives, not after the idle timeout.
func TestHugeFrameRefused(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", strings.TrimPrefix(hs.URL, "http://"))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if !waitFor(5*time.Second, func() bool { return srv.Stats().ActiveSessions == 1 }) {
		t.Fatalf("no session: %+v", srv.Stats())
	}
	// FIN + text, masked, 64-bit length 2^62, a masking key, a few bytes.
	conn.Write([]byte{0x81, 0xff, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 'a', 'b'})
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a frame declaring 2^62 bytes held its connection for 5 s")
	}
	if !waitFor(5*time.Second, func() bool { return srv.Stats().ActiveSessions == 0 }) {
		t.Fatalf("session not freed: %+v", srv.Stats())
	}
	// A frame under the limit, split across writes, still works.
	c := dial(t, hs)
	defer c.close()
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
}
