package sandbox

import (
	"context"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/task"
)

// A snapshot holds its parent's state, and its MCP server and client
// session are made on first use, not at once (a snapshot that is only
// forked never builds them): forks of it, its own calls in process and
// over its lazily made session all see the state it was taken in, isolated
// both ways; closed, it leaves nothing running.
func TestSandboxSnapshot(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		f := newFactory(t, loadCustomers(t), Options{DSN: dsn})
		ctx := context.Background()
		parent := fork(t, f)
		call(t, parent, task.ToolQueryDatabase, `{"sql": "DELETE FROM orders WHERE customer_id = 1"}`)
		call(t, parent, task.ToolQueryDatabase, `{"sql": "DELETE FROM customers WHERE id = 1"}`)
		base := runtime.NumGoroutine()
		var snaps []*Sandbox
		for range 10 {
			snap, err := parent.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { snap.Close() })
			snaps = append(snaps, snap)
		}
		if g := runtime.NumGoroutine(); g > base+2 {
			t.Errorf("10 snapshots started %d goroutines (an MCP session each?)", g-base)
		}
		snap := snaps[0]
		snap.wire.Lock()
		wired := snap.cs != nil
		snap.wire.Unlock()
		if wired {
			t.Error("a snapshot made its MCP session at once")
		}
		// Children of the snapshot start from it and stay apart.
		a, err := snap.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := snap.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		call(t, parent, task.ToolQueryDatabase, `{"sql": "DELETE FROM customers WHERE id = 2 AND id NOT IN (SELECT customer_id FROM orders)"}`)
		call(t, a, task.ToolQueryDatabase, `{"sql": "UPDATE customers SET country = 'ZZ'"}`)
		for name, s := range map[string]*Sandbox{"the snapshot": snap, "a sibling": b} {
			if c := count(t, s, "SELECT COUNT(*) FROM customers"); c != 35 {
				t.Errorf("%s sees %d customers, want the 35 of the state it was taken in", name, c)
			}
			if c := count(t, s, "SELECT COUNT(*) FROM customers WHERE country = 'ZZ'"); c != 0 {
				t.Errorf("%s sees a fork's UPDATE: %d", name, c)
			}
		}
		// Over MCP, through the session made now.
		cs := snap.Session()
		if cs == nil {
			t.Fatal("no session for a snapshot")
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: task.ToolQueryDatabase, Arguments: map[string]any{"sql": "SELECT COUNT(*) FROM customers WHERE id = 1"}})
		if err != nil || res.IsError {
			t.Fatalf("a call over the snapshot's session: %v %v", res, err)
		}
		if got := ResultText(res); got == "" {
			t.Error("an empty result over the snapshot's session")
		}
		if snap.Session() != cs {
			t.Error("a second Session made another session")
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: task.ToolQueryDatabase, Arguments: map[string]any{"sql": "ATTACH ':memory:' AS x"}})
		if err != nil || !res.IsError {
			t.Errorf("ATTACH over the snapshot's session: %v %v", res, err)
		}
		for _, s := range snaps {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}
		if snaps[1].Session() != nil {
			t.Error("a closed snapshot that never had a session made one")
		}
		if _, err := snaps[1].Call(ctx, "no_such_tool", nil); err == nil {
			t.Error("a call over MCP in a closed snapshot that never had a session succeeded")
		}
	})
}
