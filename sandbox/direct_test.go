package sandbox

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mcprl/mcprl/task"
)

// TestBuiltinCallMatchesSession: Call runs the built-in tools in process;
// every result equals the one the same calls get over the sandbox's MCP
// session, on a second fork of the same fixture given the same calls in the
// same order (writes included, so the forks stay alike).
func TestBuiltinCallMatchesSession(t *testing.T) {
	fx := loadCustomers(t)
	direct := fork(t, newFactory(t, fx, Options{}))
	viaMCP := fork(t, newFactory(t, fx, Options{SDKPipe: true}))
	calls := []struct{ name, args string }{
		{task.ToolQueryDatabase, `{"sql": "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"}`},
		{task.ToolQueryDatabase, `{"sql": "SELECT id, email, status, created_at FROM customers WHERE id < 4 ORDER BY id"}`},
		{task.ToolQueryDatabase, `{ "sql" : "UPDATE customers SET status = 'inactive' WHERE id = 1" }`},
		{task.ToolQueryDatabase, `{"sql": "SELECT status, COUNT(*) FROM customers GROUP BY status"}`},
		{task.ToolQueryDatabase, `{"sql": "SELEC nonsense"}`},
		{task.ToolQueryDatabase, `{"sql": "ATTACH DATABASE 'x.db' AS x"}`},
		{task.ToolQueryDatabase, `{"sql": "SELECT 1; SELECT 2"}`},
		{task.ToolQueryDatabase, `{"sql": ""}`},
		{task.ToolQueryDatabase, `{}`},
		{task.ToolQueryDatabase, ``},
		{task.ToolQueryDatabase, `null`},
		{task.ToolQueryDatabase, `{"query": "SELECT 1"}`},
		{task.ToolQueryDatabase, `{"sql": [1, 2, "<b>"]}`},
		{task.ToolQueryDatabase, `{"sql": "SELECT 1", "extra": true}`},
		{task.ToolQueryDatabase, `[1, 2]`},
		{task.ToolQueryDatabase, `{"sql": "SELECT '<tag> & \u00e9'"}`},
		{task.ToolQueryDatabase, `{"sql": "SELECT 1`},
		{task.ToolRunLinter, `{"path": "inactive_customers.sql"}`},
		{task.ToolRunLinter, `{"path": "report.json"}`},
		{task.ToolRunLinter, `{"path": "../schema.sql"}`},
		{task.ToolRunLinter, `{"path": "/etc/passwd"}`},
		{task.ToolRunLinter, `{"path": "missing.sql"}`},
		{task.ToolRunLinter, `{"file": "report.json"}`},
	}
	ctx := context.Background()
	for _, c := range calls {
		got, gerr := direct.Call(ctx, c.name, json.RawMessage(c.args))
		want, werr := viaMCP.Call(ctx, c.name, json.RawMessage(c.args))
		if (gerr != nil) != (werr != nil) {
			t.Fatalf("%s(%s): error %v in process, %v over MCP", c.name, c.args, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Errorf("%s(%s):\nin process %s\nover MCP   %s", c.name, c.args, g, w)
		}
	}
}
