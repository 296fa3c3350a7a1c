package sandbox

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcprl/mcprl/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServe: Serve and HTTPHandler give any MCP client the sandbox, each
// with a database fork of its own that the fixture never sees.
func TestServe(t *testing.T) {
	f := newFactory(t, loadCustomers(t), Options{CallTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	check := func(t *testing.T, cs *mcp.ClientSession) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: task.ToolQueryDatabase, Arguments: map[string]any{"sql": "DELETE FROM orders"}})
		if err != nil || res.IsError {
			t.Fatalf("delete: %v %v", err, res)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: task.ToolQueryDatabase, Arguments: map[string]any{"sql": "SELECT COUNT(*) FROM orders"}})
		if err != nil || res.IsError || ResultText(res) == "" {
			t.Fatalf("count: %v %v", err, res)
		}
		if sc := res.StructuredContent.(map[string]any); sc["rows"].([]any)[0].([]any)[0] != float64(0) {
			t.Errorf("count after delete: %v", sc)
		}
		// The server bounds calls itself: a runaway statement ends in time.
		start := time.Now()
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: task.ToolQueryDatabase, Arguments: map[string]any{"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"}})
		if d := time.Since(start); d > 2*time.Second || err != nil || !res.IsError || !strings.Contains(ResultText(res), "timed out") {
			t.Errorf("runaway statement: %v %v after %s, want an isError result saying it timed out", err, res, d)
		}
	}

	t.Run("transport", func(t *testing.T) {
		st, ct := mcp.NewInMemoryTransports()
		done := make(chan error, 1)
		go func() { done <- f.Serve(ctx, st) }()
		cs, err := client.Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, cs)
		cs.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	t.Run("http", func(t *testing.T) {
		h, closeDB := f.HTTPHandler(HTTPOptions{})
		hs := httptest.NewServer(h)
		defer hs.Close()
		defer closeDB()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		check(t, cs)
	})

	// The fixture's template is untouched.
	s := fork(t, f)
	if n := count(t, s, "SELECT COUNT(*) FROM orders"); n != 40 {
		t.Errorf("a new fork sees %d orders, want 40", n)
	}
}
