package envserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprl/mcprl/envserver"
	"github.com/mcprl/mcprl/internal/pgtest"
)

// forkOf sends {"type": "fork"} and decodes the answer.
func (c *client) forkOf() envserver.ForkResult {
	c.t.Helper()
	r := c.send("fork", nil)
	if r.Type != "fork" {
		c.t.Fatalf("fork: got %s %s", r.Type, r.Data)
	}
	var fr envserver.ForkResult
	if err := json.Unmarshal(r.Data, &fr); err != nil {
		c.t.Fatal(err)
	}
	return fr
}

func count(t *testing.T, c *client, sql string) string {
	t.Helper()
	return strings.TrimSpace(c.observation("step", call(sql)).result(t).Data)
}

// A fork of an episode is a snapshot: a reset from it on another
// connection starts there (the same task, state and calls), in a fork of
// its own, and the writes of parent, children and grandchildren never
// reach each other. The fork is reusable and scored like any episode. On
// both backends (PostgreSQL's snapshot is parked: sqldb's TestSnapshot).
func TestForkEpisode(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testForkEpisode(t, "") })
	t.Run("postgres", func(t *testing.T) { testForkEpisode(t, pgtest.DSN(t)) })
}

func testForkEpisode(t *testing.T, dsn string) {
	srv, hs := newServer(t, envserver.Options{Rewards: "assertions", DSN: dsn})
	parent := dial(t, hs)
	defer parent.close()
	parent.observation("reset", map[string]any{"task_id": "customers-inactive-variants-002"})
	parent.observation("step", call("DELETE FROM orders WHERE id <= 10"))
	fr := parent.forkOf()
	if fr.ForkID == "" || fr.StepCount != 1 {
		t.Fatalf("fork: %+v", fr)
	}
	// The parent goes on; its later writes stay its own.
	parent.observation("step", call("DELETE FROM orders"))

	var kids []*client
	for i := range 2 {
		k := dial(t, hs)
		defer k.close()
		kids = append(kids, k)
		obs := k.observation("reset", map[string]any{"fork_id": fr.ForkID})
		if string(obs.Observation["fork_of"]) != `"`+fr.ForkID+`"` || string(obs.Observation["task_id"]) != `"customers-inactive-variants-002"` {
			t.Fatalf("child %d reset: %v", i, obs.Observation)
		}
		st := k.send("state", nil)
		var state struct {
			StepCount int `json:"step_count"`
			ToolCalls int `json:"tool_calls"`
		}
		json.Unmarshal(st.Data, &state)
		if state.StepCount != 1 || state.ToolCalls != 1 {
			t.Errorf("child %d starts with %+v, want the parent's 1 step and 1 call", i, state)
		}
	}
	if got := count(t, kids[0], "SELECT COUNT(*) FROM orders"); !strings.Contains(got, "30") {
		t.Errorf("child 0 sees %q orders, want the fork's 30 (not the parent's later 0)", got)
	}
	kids[0].observation("step", call("DELETE FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)"))
	if got := count(t, kids[1], "SELECT COUNT(*) FROM customers"); !strings.Contains(got, "36") {
		t.Errorf("child 1 sees %q customers: its sibling's DELETE reached it", got)
	}
	if got := count(t, parent, "SELECT COUNT(*) FROM customers"); !strings.Contains(got, "36") {
		t.Errorf("the parent sees %q customers: a child's DELETE reached it", got)
	}
	// A fork of a fork: the grandchild starts from child 1's state.
	kids[1].observation("step", call("UPDATE customers SET status = 'x' WHERE id = 1"))
	g := dial(t, hs)
	defer g.close()
	g.observation("reset", map[string]any{"fork_id": kids[1].forkOf().ForkID})
	if got := count(t, g, "SELECT COUNT(*) FROM customers WHERE status = 'x'"); !strings.Contains(got, "1") {
		t.Errorf("the grandchild sees %q rows of its parent's UPDATE, want 1", got)
	}
	// Scored like any episode, by the server, with the calls it inherited.
	fin := kids[1].observation("step", map[string]any{"type": "finish", "completion": "There are 13 inactive customers."})
	if !fin.Done || fin.Reward == nil {
		t.Errorf("finish of a forked episode: %+v", fin)
	}
	if st := srv.Stats(); st.EpisodeForks != 2 || st.OpenEpisodeForks != 2 {
		t.Errorf("stats: %+v, want 2 forks of episodes, 2 open", st)
	}
	// An unknown fork id is a VALIDATION_ERROR, and the session goes on.
	if e := g.send("reset", map[string]any{"fork_id": "nope"}).err(t); e.Code != "VALIDATION_ERROR" || !strings.Contains(e.Message, "fork") {
		t.Errorf("unknown fork id: %+v", e)
	}
	count(t, g, "SELECT 1")
	// A fork needs a running episode.
	fresh := dial(t, hs)
	defer fresh.close()
	if e := fresh.send("fork", nil).err(t); e.Code != "EXECUTION_ERROR" {
		t.Errorf("fork before reset: %+v", e)
	}
}

// A fork holds a session slot: past the cap it is refused with
// CAPACITY_REACHED and the session goes on; a fork whose client vanished
// is freed after the idle timeout, and nothing is left.
func TestForkCapAndExpiry(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{MaxSessions: 2, IdleTimeout: 300 * time.Millisecond})
	a := dial(t, hs)
	defer a.close()
	a.observation("reset", map[string]any{"task_id": "customers-inactive-variants-002"})
	fr := a.forkOf()
	if e := a.send("fork", nil).err(t); e.Code != "CAPACITY_REACHED" {
		t.Errorf("a fork past the cap: %+v", e)
	}
	count(t, a, "SELECT 1") // the session goes on
	a.close()               // the client vanishes; its fork stays until unused for the idle timeout
	if !waitFor(5*time.Second, func() bool { st := srv.Stats(); return st.OpenEpisodeForks == 0 && st.OpenForks == 0 }) {
		t.Fatalf("after the idle timeout: %+v", srv.Stats())
	}
	b := dial(t, hs)
	defer b.close()
	if e := b.send("reset", map[string]any{"fork_id": fr.ForkID}).err(t); e.Code != "VALIDATION_ERROR" || !strings.Contains(e.Message, "expired") {
		t.Errorf("an expired fork: %+v", e)
	}
}

// POST /mcp forks a session's episode (openenv/session/fork) and starts a
// new session from the fork (openenv/session/create with fork_id).
func TestForkOverMCP(t *testing.T) {
	srv, hs := newServer(t, envserver.Options{})
	rpc := func(method string, params map[string]any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		resp, err := http.Post(hs.URL+"/mcp", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	sid := rpc("openenv/session/create", nil)["result"].(map[string]any)["session_id"].(string)
	if r := rpc("tools/call", map[string]any{"session_id": sid, "fixture": "customers", "name": "query_database", "arguments": map[string]any{"sql": "DELETE FROM orders"}}); r["error"] != nil {
		t.Fatalf("tools/call: %v", r)
	}
	forked := rpc("openenv/session/fork", map[string]any{"session_id": sid})
	fr, ok := forked["result"].(map[string]any)
	if !ok {
		t.Fatalf("openenv/session/fork: %v", forked)
	}
	child := rpc("openenv/session/create", map[string]any{"fork_id": fr["fork_id"]})["result"].(map[string]any)
	csid := child["session_id"].(string)
	res := rpc("tools/call", map[string]any{"session_id": csid, "name": "query_database", "arguments": map[string]any{"sql": "SELECT COUNT(*) FROM orders"}})
	if b, _ := json.Marshal(res); !strings.Contains(string(b), `0\n(1 row)`) {
		t.Errorf("the child session does not see its fork's state: %s", b)
	}
	if e := rpc("openenv/session/create", map[string]any{"fork_id": "nope"})["error"]; e == nil || !strings.Contains(e.(map[string]any)["message"].(string), "VALIDATION_ERROR") {
		t.Errorf("unknown fork id over /mcp: %v", e)
	}
	if st := srv.Stats(); st.EpisodeForks != 1 {
		t.Errorf("stats %+v", st)
	}
}
