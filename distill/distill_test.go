package distill_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/distill"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

const call = "<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT 1\"}}\n</tool_call>"

func turn(text string, calls ...chat.CallResult) chat.Turn {
	return chat.Turn{Text: text, Calls: calls}
}

var ok = chat.CallResult{Call: chat.Call{Name: "query_database", Arguments: json.RawMessage(`{"sql": "SELECT 1"}`)}, Text: "1"}

func TestGolden(t *testing.T) {
	tr := &chat.Trajectory{Turns: []chat.Turn{turn("Let me count.\n"+call, ok), turn(call, ok), turn("There is 1.")}}
	msgs, err := distill.Golden(tr)
	if err != nil {
		t.Fatal(err)
	}
	// Written out, the arguments keep the teacher's bytes, and the file
	// reads back to the same turns.
	var b bytes.Buffer
	if err := task.WriteJSONL(&b, []task.Task{{ID: "t", Task: "Count.", Fixture: "customers", Golden: msgs}}); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"t","task":"Count.","fixture":"customers","golden":[{"role":"assistant","content":"Let me count.","tool_calls":[{"name":"query_database","arguments":{"sql": "SELECT 1"}}]},{"role":"tool","content":"1","name":"query_database"},` +
		`{"role":"assistant","tool_calls":[{"name":"query_database","arguments":{"sql": "SELECT 1"}}]},{"role":"tool","content":"1","name":"query_database"},{"role":"assistant","content":"There is 1."}]}` + "\n"
	if b.String() != want {
		t.Errorf("written\n%s\nwant\n%s", b.String(), want)
	}
	var back task.Task
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	turns, err := task.GoldenTurns(&back, toolcall.RenderCall)
	if err != nil || len(turns) != 3 || turns[0] != tr.Turns[0].Text || turns[1] != tr.Turns[1].Text || turns[2] != "There is 1.<|im_end|>" {
		t.Errorf("read back: %q, %v", turns, err)
	}

	bad := chat.CallResult{Call: chat.Call{Arguments: json.RawMessage(`{oops`)}, ParseError: "invalid JSON"}
	for name, tc := range map[string]struct {
		tr   *chat.Trajectory
		want string
	}{
		"malformed call":   {&chat.Trajectory{Turns: []chat.Turn{turn("<tool_call>{oops</tool_call>", bad), turn("1")}}, "want one well-formed call"},
		"text after call":  {&chat.Trajectory{Turns: []chat.Turn{turn(call+" and more", ok), turn("1")}}, "a golden writes"},
		"truncated":        {&chat.Trajectory{Turns: []chat.Turn{turn(call, ok)}, Truncated: true}, "truncated"},
		"error":            {&chat.Trajectory{Turns: []chat.Turn{turn(call, ok)}, Error: "policy: HTTP 500"}, "HTTP 500"},
		"ends with a call": {&chat.Trajectory{Turns: []chat.Turn{turn(call, ok)}}, "last turn calls a tool"},
	} {
		if _, err := distill.Golden(tc.tr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
