package envserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/envserver"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

// goldenText is a task's golden trajectory as the model would write it:
// each assistant turn's text and calls, and its calls in order.
func goldenText(tk *task.Task) (string, []chat.Call) {
	var parts []string
	var calls []chat.Call
	for _, m := range tk.Golden {
		if m.Role != "assistant" {
			continue
		}
		s := m.Content
		for _, c := range m.ToolCalls {
			s += "\n" + toolcall.RenderCall(c)
			calls = append(calls, c)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n"), calls
}

// TestEpisode plays the user's task over /ws: reset by id, the golden calls
// as steps, finish with the golden text. Each tool result must be the
// observation an in-process sandbox gives for the same call, and the
// rewards must equal mcprl's own scoring of the same completion replayed
// in a fork of its own.
func TestEpisode(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{Rewards: "assertions"})
	c := dial(t, hs)
	defer c.close()

	tasks, err := task.Load(tasksFile, task.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tk := &tasks[0]
	fx, err := task.LoadFixture(fixturesDir + "/" + tk.Fixture)
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandbox.NewFactory(context.Background(), fx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	r := c.observation("reset", map[string]any{"task_id": tk.ID, "episode_id": "ep-1"})
	var obs envserver.ResetObservation
	raw, _ := json.Marshal(r.Observation)
	if err := json.Unmarshal(raw, &obs); err != nil {
		t.Fatal(err)
	}
	if obs.TaskID != tk.ID || obs.Task != tk.Task || obs.SystemPrompt != tk.SystemPrompt || obs.EpisodeID != "ep-1" || obs.Fixture != "customers" {
		t.Fatalf("reset observation %+v does not describe task %s", obs, tk.ID)
	}
	if r.Done || r.Reward != nil {
		t.Fatalf("reset: done %v reward %v", r.Done, r.Reward)
	}
	var names []string
	for _, tool := range obs.Tools {
		names = append(names, tool.Name)
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema.Type != "object" || len(schema.Properties) == 0 {
			t.Errorf("tool %s: input_schema %s is not an object schema", tool.Name, tool.InputSchema)
		}
	}
	if strings.Join(names, ",") != "query_database,run_linter" || len(obs.ToolSchemas) != 2 {
		t.Fatalf("tools %v, %d function schemas", names, len(obs.ToolSchemas))
	}

	text, calls := goldenText(tk)
	ref, err := f.Fork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, call := range calls {
		var args map[string]any
		json.Unmarshal(call.Arguments, &args)
		got := c.observation("step", map[string]any{"type": "call_tool", "tool_name": call.Name, "arguments": args})
		if got.Done || got.Reward != nil {
			t.Fatalf("step: done %v reward %v before finish", got.Done, got.Reward)
		}
		res := got.result(t)
		want, err := ref.Call(context.Background(), call.Name, call.Arguments)
		if err != nil {
			t.Fatal(err)
		}
		if res.Data != sandbox.ResultText(want) || res.IsError != want.IsError {
			t.Errorf("%s: served %q (isError %v), in-process %q (isError %v)", call.Name, res.Data, res.IsError, sandbox.ResultText(want), want.IsError)
		}
	}

	var st envserver.State
	stRaw := c.send("state", nil)
	if stRaw.Type != "state" {
		t.Fatalf("state: %s %s", stRaw.Type, stRaw.Data)
	}
	json.Unmarshal(stRaw.Data, &st)
	if st.Done || st.Reward == nil || st.StepCount != len(calls) || st.ToolCalls != len(calls) || st.EpisodeID == nil || *st.EpisodeID != "ep-1" {
		t.Fatalf("state before finish: %+v", st)
	}

	fin := c.observation("step", map[string]any{"type": "finish", "completion": text})
	if !fin.Done || fin.Reward == nil {
		t.Fatalf("finish: done %v reward %v", fin.Done, fin.Reward)
	}
	var rewards map[string]float64
	json.Unmarshal(fin.Observation["rewards"], &rewards)

	// mcprl's own scoring of the same completion, replayed in a fresh fork.
	own, err := f.Fork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	traj, err := reward.Replay(context.Background(), own, text)
	if err != nil {
		t.Fatal(err)
	}
	in := &reward.Input{Task: tk, Trajectory: traj, Sandbox: own}
	for _, name := range []string{"assertions", "compute_mcp_reward"} {
		fn, _ := reward.NewRegistry().New(name)
		want, err := fn.Score(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if rewards[name] != want.Value {
			t.Errorf("reward %s: served %v, mcprl score %v", name, rewards[name], want.Value)
		}
	}
	if *fin.Reward != rewards["assertions"] || rewards["assertions"] != 1 {
		t.Errorf("finish reward %v, rewards %v: the golden trajectory should hold every assertion", *fin.Reward, rewards)
	}

	stRaw = c.send("state", nil)
	json.Unmarshal(stRaw.Data, &st)
	if !st.Done || st.Reward == nil || *st.Reward != *fin.Reward {
		t.Fatalf("state after finish: %+v", st)
	}
	if e := c.send("step", call("SELECT 1")).err(t); e.Code != envserver.CodeExecution || !strings.Contains(e.Message, "done") {
		t.Fatalf("step after done: %+v", e)
	}

	// A new reset is a new episode in a new fork.
	c.observation("reset", map[string]any{"task_id": tk.ID})
	if s := srv.Stats(); s.ForksCreated != 2 || s.OpenForks != 1 || s.ToolCalls != int64(len(calls)) || s.EpisodesScored != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestInlineTaskAndMessages resets with the task's fields inline and
// finishes with TRL's conversational completion (a list of messages).
func TestInlineTaskAndMessages(t *testing.T) {
	_, hs := newServer(t, envserver.Options{Rewards: "seed,assertions"})
	c := dial(t, hs)
	defer c.close()
	r := c.observation("reset", map[string]any{
		"task":                    "How many customers are there?",
		"ground_truth_assertions": []string{"SELECT COUNT(*) FROM customers"},
		"fixture":                 "customers",
		"prompt":                  []map[string]string{{"role": "user", "content": "ignored: a dataset column"}},
	})
	var prompt string
	json.Unmarshal(r.Observation["system_prompt"], &prompt)
	if !strings.HasPrefix(prompt, toolcall.CatalogPreamble) {
		t.Fatalf("system prompt of a task without one: %q, want the catalog", prompt)
	}
	res := c.observation("step", call("SELECT COUNT(*) FROM customers")).result(t)
	if !strings.Contains(res.Data, "36") {
		t.Fatalf("count: %q", res.Data)
	}
	msgs := []map[string]any{
		{"role": "assistant", "content": "", "tool_calls": []map[string]any{{"type": "function", "function": map[string]any{
			"name": "query_database", "arguments": map[string]any{"sql": "SELECT COUNT(*) FROM customers"}}}}},
		{"role": "tool", "name": "query_database", "content": res.Data},
		{"role": "assistant", "content": "There are 36 customers."},
	}
	fin := c.observation("step", map[string]any{"type": "finish", "completion": msgs})
	var rewards map[string]float64
	json.Unmarshal(fin.Observation["rewards"], &rewards)
	// seed: valid JSON, known tool, no "inactive" in the SQL: 0.6.
	if rewards["compute_mcp_reward"] != 0.6 || rewards["assertions"] != 1 || *fin.Reward != 1.6 {
		t.Fatalf("rewards %v total %v, want seed 0.6, assertions 1, total 1.6", rewards, *fin.Reward)
	}

	c.observation("reset", map[string]any{"task": "Count inactive customers.", "fixture": "customers"})
	c.observation("step", call("SELECT 1"))
	fin = c.observation("step", map[string]any{"type": "finish", "completion": []map[string]any{
		{"role": "assistant", "tool_calls": []map[string]any{{"type": "function", "function": map[string]any{"name": "drop_tables", "arguments": "{}"}}}}}})
	json.Unmarshal(fin.Observation["rewards"], &rewards)
	if rewards["compute_mcp_reward"] != -0.5 {
		t.Fatalf("hallucinated tool: compute_mcp_reward %v, want -0.5", rewards["compute_mcp_reward"])
	}
}

// TestBadMessages sends every kind of bad message and checks each gets
// OpenEnv's error code and the session keeps working.
func TestBadMessages(t *testing.T) {
	_, hs := newServer(t, envserver.Options{MaxMessageBytes: 4096})
	c := dial(t, hs)
	defer c.close()

	if e := c.send("step", call("SELECT 1")).err(t); e.Code != envserver.CodeExecution {
		t.Errorf("step before reset: %+v", e)
	}
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	cases := []struct{ name, msg, code string }{
		{"not JSON", `{"type": "step", `, envserver.CodeInvalidJSON},
		{"garbage", "\x00\xff", envserver.CodeInvalidJSON},
		{"unknown type", `{"type": "jump"}`, envserver.CodeUnknownType},
		{"extra field", `{"type": "state", "extra": 1}`, envserver.CodeValidation},
		{"type not a string", `{"type": 7}`, envserver.CodeValidation},
		{"step without data", `{"type": "step"}`, envserver.CodeValidation},
		{"unknown action", `{"type": "step", "data": {"type": "teleport"}}`, envserver.CodeValidation},
		{"action extra field", `{"type": "step", "data": {"type": "call_tool", "tool_name": "query_database", "sudo": true}}`, envserver.CodeValidation},
		{"missing tool name", `{"type": "step", "data": {"type": "call_tool", "arguments": {}}}`, envserver.CodeValidation},
		{"arguments not an object", `{"type": "step", "data": {"type": "call_tool", "tool_name": "query_database", "arguments": "DROP TABLE customers"}}`, envserver.CodeValidation},
		{"unknown task", `{"type": "reset", "data": {"task_id": "no-such-task"}}`, envserver.CodeValidation},
		{"reset without task", `{"type": "reset", "data": {}}`, envserver.CodeValidation},
		{"unknown fixture", `{"type": "reset", "data": {"task": "x", "fixture": "../../etc"}}`, envserver.CodeValidation},
		{"task not a string", `{"type": "reset", "data": {"task": ["x"], "fixture": "customers"}}`, envserver.CodeValidation},
		{"too big", `{"type": "step", "data": {"type": "call_tool", "tool_name": "query_database", "arguments": {"sql": "SELECT '` + strings.Repeat("x", 8000) + `'"}}}`, envserver.CodeValidation},
	}
	for _, tc := range cases {
		if e := c.raw(tc.msg).err(t); e.Code != tc.code {
			t.Errorf("%s: code %s (%s), want %s", tc.name, e.Code, e.Message, tc.code)
		}
		// The session is still usable, and still in its episode.
		res := c.observation("step", call("SELECT COUNT(*) FROM customers")).result(t)
		if res.IsError || !strings.Contains(res.Data, "36") {
			t.Fatalf("after %s: %+v", tc.name, res)
		}
	}
	// A tool's own failures are results the model reads, not errors.
	for _, bad := range []map[string]any{
		{"type": "call_tool", "tool_name": "query_database", "arguments": map[string]any{"sql": "ATTACH DATABASE '/etc/passwd' AS x"}},
		{"type": "call_tool", "tool_name": "query_database", "arguments": map[string]any{"sql": "SELEC nonsense"}},
		{"type": "call_tool", "tool_name": "run_linter", "arguments": map[string]any{"path": "../../../etc/passwd"}},
		{"type": "call_tool", "tool_name": "run_linter", "arguments": map[string]any{"path": "/etc/passwd"}},
		{"type": "call_tool", "tool_name": "no_such_tool", "arguments": map[string]any{}},
		{"type": "call_tool", "tool_name": "query_database", "arguments": map[string]any{"query": "SELECT 1"}},
	} {
		res := c.observation("step", bad).result(t)
		if !res.IsError || strings.Contains(res.Data, "root:") {
			t.Errorf("%v: %+v, want an isError result", bad, res)
		}
	}
}

// TestIsolation: what one session changes, no other session sees, and a
// reset starts from the fixture again.
func TestIsolation(t *testing.T) {
	_, hs := newServer(t, envserver.Options{})
	const n = 8
	var wg sync.WaitGroup
	counts := make([]string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := dial(t, hs)
			defer c.close()
			c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
			if i%2 == 0 {
				c.observation("step", call("UPDATE customers SET status = 'gone'"))
			}
			counts[i] = c.observation("step", call("SELECT COUNT(*) FROM customers WHERE status = 'gone'")).result(t).Data
		}(i)
	}
	wg.Wait()
	for i, got := range counts {
		want := "\n0\n"
		if i%2 == 0 {
			want = "\n36\n"
		}
		if !strings.Contains(got, want) {
			t.Errorf("session %d: count %q, want %q", i, got, want)
		}
	}
	c := dial(t, hs)
	defer c.close()
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	c.observation("step", call("UPDATE customers SET status = 'gone'"))
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	if got := c.observation("step", call("SELECT COUNT(*) FROM customers WHERE status = 'gone'")).result(t).Data; !strings.Contains(got, "\n0\n") {
		t.Errorf("after reset: %q, want the fixture's rows", got)
	}
}

// TestCapacity: past the cap a connection gets CAPACITY_REACHED and is
// closed; closing a session frees its slot.
func TestCapacity(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{MaxSessions: 2})
	a, b := dial(t, hs), dial(t, hs)
	a.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	b.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	c := dial(t, hs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if e := c.recv(ctx).err(t); e.Code != envserver.CodeCapacityReached {
		t.Fatalf("third session: %+v", e)
	}
	if _, _, err := c.c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
		t.Fatalf("third session: read %v, want close %v", err, websocket.StatusTryAgainLater)
	}
	a.write(`{"type": "close"}`)
	if _, _, err := a.c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after close: read %v, want close %v", err, websocket.StatusNormalClosure)
	}
	if !waitFor(5*time.Second, func() bool { return srv.Stats().ActiveSessions == 1 && srv.Stats().OpenForks == 1 }) {
		t.Fatalf("after close: %+v", srv.Stats())
	}
	d := dial(t, hs)
	defer d.close()
	d.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	b.close()
	if s := srv.Stats(); s.SessionsRejected != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestIdleTimeout: a client that connects, starts an episode and goes
// silent (a half-open socket) has its fork and slot freed after the idle
// timeout, and its connection closed.
func TestIdleTimeout(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{IdleTimeout: 300 * time.Millisecond, MaxSessions: 1})
	c := dial(t, hs)
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	start := time.Now()
	if !waitFor(5*time.Second, func() bool { s := srv.Stats(); return s.OpenForks == 0 && s.ActiveSessions == 0 }) {
		t.Fatalf("idle session not freed: %+v", srv.Stats())
	}
	if el := time.Since(start); el < 300*time.Millisecond || el > 2*time.Second {
		t.Errorf("freed after %v, idle timeout 300ms", el)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := c.c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("idle client reads %v, want close %v", err, websocket.StatusPolicyViolation)
	}
	// The slot is free again.
	d := dial(t, hs)
	defer d.close()
	d.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	if s := srv.Stats(); s.SessionsReaped != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestCloseFreesEverything: Close ends live sessions (their clients see
// going-away), frees every fork and leaves no goroutine behind.
func TestCloseFreesEverything(t *testing.T) {
	base := settle(0)
	fxs, err := task.LoadFixtures(fixturesDir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := envserver.New(context.Background(), envserver.Options{Fixtures: fxs})
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTPServer(srv)
	var clients []*client
	for i := 0; i < 4; i++ {
		c := dial(t, hs)
		c.observation("reset", map[string]any{"task": "count", "fixture": "customers"})
		c.observation("step", call("SELECT 1"))
		clients = append(clients, c)
	}
	if s := srv.Stats(); s.OpenForks != 4 || s.ActiveSessions != 4 {
		t.Fatalf("stats %+v", s)
	}
	// Clients read as real ones do, so that they answer the close handshake.
	statuses := make(chan websocket.StatusCode, len(clients))
	for _, c := range clients {
		go func() {
			_, _, err := c.c.Read(context.Background())
			statuses <- websocket.CloseStatus(err)
		}()
	}
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("Close took %v", el)
	}
	if s := srv.Stats(); s.OpenForks != 0 || s.ActiveSessions != 0 {
		t.Fatalf("after Close: %+v", s)
	}
	// Each client's connection ends; with the close handshake's status
	// (going away) unless the socket closed before the client read the
	// close frame (the websocket package closes it when its close
	// handshake races the session's blocked read).
	for range clients {
		if st := <-statuses; st != websocket.StatusGoingAway && st != -1 {
			t.Errorf("client's connection closed with %v, want %v", st, websocket.StatusGoingAway)
		}
	}
	for _, c := range clients {
		c.c.CloseNow()
	}
	hs.Close()
	if n := settle(base); n > base {
		t.Errorf("%d goroutines after Close, %d before", n, base)
	}
}

// TestHTTPMCP drives POST /mcp: tools/list, a call outside any session (in
// a fork of its own), a session's calls that share its fork, the errors.
func TestHTTPMCP(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{})
	post := func(body string) map[string]json.RawMessage {
		t.Helper()
		resp, err := http.Post(hs.URL+"/mcp", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %s", err, b)
		}
		return m
	}
	errCode := func(m map[string]json.RawMessage) int {
		var e struct{ Code int }
		json.Unmarshal(m["error"], &e)
		return e.Code
	}
	list := post(`{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"fixture": "customers"}}`)
	if !bytes.Contains(list["result"], []byte(`"inputSchema"`)) || !bytes.Contains(list["result"], []byte(`"query_database"`)) {
		t.Fatalf("tools/list: %s", list["result"])
	}
	del := post(`{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"fixture": "customers", "name": "query_database", "arguments": {"sql": "UPDATE customers SET status = 'gone'"}}}`)
	if string(del["id"]) != "2" || del["error"] != nil {
		t.Fatalf("tools/call: %v", del)
	}
	cnt := post(`{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"fixture": "customers", "name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM customers WHERE status = 'gone'"}}}`)
	if !bytes.Contains(cnt["result"], []byte(`[[0]]`)) {
		t.Fatalf("a call outside a session must see the fixture: %s", cnt["result"])
	}
	if s := srv.Stats(); s.OpenForks != 0 || s.ActiveSessions != 0 || s.ForksCreated != 2 {
		t.Fatalf("calls outside sessions left %+v", s)
	}

	var created struct {
		Result struct {
			SessionID string `json:"session_id"`
		}
	}
	b, _ := json.Marshal(post(`{"jsonrpc": "2.0", "id": 4, "method": "openenv/session/create"}`))
	json.Unmarshal(b, &created)
	sid := created.Result.SessionID
	if sid == "" {
		t.Fatalf("session/create: %s", b)
	}
	post(`{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"session_id": "` + sid + `", "fixture": "customers", "name": "query_database", "arguments": {"sql": "UPDATE customers SET status = 'gone' WHERE id < 10"}}}`)
	cnt = post(`{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"session_id": "` + sid + `", "name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM customers WHERE status = 'gone'"}}}`)
	if !bytes.Contains(cnt["result"], []byte(`[[9]]`)) {
		t.Fatalf("a session's calls share its fork: %s", cnt["result"])
	}
	if s := srv.Stats(); s.OpenForks != 1 || s.ActiveSessions != 1 {
		t.Fatalf("open session: %+v", s)
	}
	if m := post(`{"jsonrpc": "2.0", "id": 7, "method": "openenv/session/close", "params": {"session_id": "` + sid + `"}}`); m["error"] != nil {
		t.Fatalf("session/close: %s", m["error"])
	}
	if s := srv.Stats(); s.OpenForks != 0 || s.ActiveSessions != 0 {
		t.Fatalf("closed session: %+v", s)
	}
	for body, code := range map[string]int{
		`{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"session_id": "` + sid + `", "name": "query_database"}}`: -32602,
		`{"jsonrpc": "2.0", "id": 9, "method": "resources/list"}`:                                                                -32601,
		`{"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"fixture": "customers"}}`:                               -32602,
		`{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": [1]}`:                                                    -32602,
		`{"jsonrpc": "2.0", "id": 12, "method": "tools/list"}`:                                                                   -32602, // two fixtures: name one
		`{"jsonrpc": "1.0", "id": 13, "method": "tools/list"}`:                                                                   -32600,
		`{"jsonrpc": "2.0", "id": `: -32700,
	} {
		if got := errCode(post(body)); got != code {
			t.Errorf("%s: code %d, want %d", body, got, code)
		}
	}
}

// TestMCPOverWebSocket: {"type": "mcp"} messages run in the session's fork.
func TestMCPOverWebSocket(t *testing.T) {
	_, hs := newServer(t, envserver.Options{})
	c := dial(t, hs)
	defer c.close()
	c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	c.observation("step", call("UPDATE customers SET status = 'gone' WHERE id <= 6"))
	r := c.send("mcp", map[string]any{"jsonrpc": "2.0", "id": "a", "method": "tools/call",
		"params": map[string]any{"name": "query_database", "arguments": map[string]any{"sql": "SELECT COUNT(*) FROM customers WHERE status = 'gone'"}}})
	if r.Type != "mcp" || !bytes.Contains(r.Data, []byte(`[[6]]`)) || !bytes.Contains(r.Data, []byte(`"id":"a"`)) {
		t.Fatalf("mcp tools/call: %s %s", r.Type, r.Data)
	}
	r = c.send("mcp", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
	if !bytes.Contains(r.Data, []byte(`run_linter`)) {
		t.Fatalf("mcp tools/list: %s", r.Data)
	}
}

// TestHealthSchemaMetadata checks the GET endpoints' shapes.
func TestHealthSchemaMetadata(t *testing.T) {
	_, hs := newServer(t, envserver.Options{})
	get := func(path string) map[string]json.RawMessage {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
		return m
	}
	if h := get("/health"); string(h["status"]) != `"healthy"` {
		t.Errorf("health %s", h["status"])
	}
	for _, k := range []string{"action", "observation", "state"} {
		if len(get("/schema")[k]) < 10 {
			t.Errorf("schema has no %s", k)
		}
	}
	if m := get("/metadata"); string(m["name"]) != `"mcprl"` || len(m["description"]) < 10 {
		t.Errorf("metadata %v", m)
	}
	if resp, err := http.Get(hs.URL + "/../../etc/passwd"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || bytes.Contains(b, []byte("root:")) {
			t.Errorf("a path outside the endpoints answered %d %q", resp.StatusCode, b)
		}
	}
}

// TestFinishReplay: a client that ran no calls (verl's compute_score) has
// the completion's calls run in the episode's fork before scoring.
func TestFinishReplay(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{})
	c := dial(t, hs)
	defer c.close()
	tasks, err := task.Load(tasksFile, task.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, calls := goldenText(&tasks[0])
	c.observation("reset", map[string]any{"task_id": tasks[0].ID})
	fin := c.observation("step", map[string]any{"type": "finish", "completion": text, "replay": true})
	var obs envserver.FinishObservation
	raw, _ := json.Marshal(fin.Observation)
	json.Unmarshal(raw, &obs)
	if obs.ToolCalls != len(calls) || obs.Rewards["assertions"] != 1 || *fin.Reward != 1 {
		t.Fatalf("replayed golden: %+v reward %v, want %d calls and every assertion held", obs, *fin.Reward, len(calls))
	}
	if s := srv.Stats(); s.ToolCalls != int64(len(calls)) {
		t.Fatalf("stats %+v", s)
	}
}

// TestCloseDuringCall: a server closed while a session's tool call runs
// still answers the call (cancelled: an error or a result saying so) and
// then closes the connection with 1001 (going away); cancelling the call
// must not cut the connection before the close frame.
func TestCloseDuringCall(t *testing.T) {
	for i := 0; i < 5; i++ {
		srv, hs := newServer(t, envserver.Options{})
		c := dial(t, hs)
		c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
		msg, _ := json.Marshal(map[string]any{"type": "step", "data": call("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c")})
		if err := c.c.Write(context.Background(), websocket.MessageText, msg); err != nil {
			t.Fatal(err)
		}
		statuses := make(chan websocket.StatusCode, 1)
		go func() {
			for {
				if _, _, err := c.c.Read(context.Background()); err != nil {
					statuses <- websocket.CloseStatus(err)
					return
				}
			}
		}()
		time.Sleep(100 * time.Millisecond) // the call is running
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		if st := <-statuses; st != websocket.StatusGoingAway {
			t.Fatalf("round %d: client's connection closed with %v, want %v", i, st, websocket.StatusGoingAway)
		}
		c.c.CloseNow()
	}
}
