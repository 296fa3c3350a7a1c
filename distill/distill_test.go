package distill_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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
	if err := distill.WriteJSONL(&b, []task.Task{{ID: "t", Task: "Count.", Fixture: "customers", Golden: msgs}}); err != nil {
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

// WriteFile creates the file's directory and writes what WriteJSONL
// writes; task.Load reads it back.
func TestWriteFile(t *testing.T) {
	tasks := []task.Task{
		{ID: "a", Task: "Count.", Fixture: "customers", Golden: []chat.Message{{Role: "assistant", Content: "1"}}},
		{ID: "b", Task: "List.", Fixture: "customers"},
	}
	path := filepath.Join(t.TempDir(), "new", "dir", "distilled.jsonl")
	if err := distill.WriteFile(path, tasks); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := distill.WriteJSONL(&want, tasks); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("file %q (%v), want %q", got, err, want.String())
	}
	back, err := task.Load(path, task.LoadOptions{})
	if err != nil || len(back) != 2 || back[0].ID != "a" || len(back[0].Golden) != 1 {
		t.Errorf("read back %+v, %v", back, err)
	}
	if err := distill.WriteFile(filepath.Join(path, "under-a-file.jsonl"), tasks); err == nil {
		t.Error("wrote under a file")
	}
}
