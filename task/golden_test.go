package task_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

func TestGoldenTurns(t *testing.T) {
	tk := &task.Task{ID: "t", Golden: []chat.Message{
		{Role: "assistant", Content: "Let me look.", ToolCalls: []chat.Call{
			{Name: "query_database", Arguments: json.RawMessage(`{"sql": "SELECT 1"}`)},
			{Name: "run_linter", Arguments: json.RawMessage(`{"path": "a.sql"}`)},
		}},
		{Role: "tool", Content: "1"},
		{Role: "assistant", Content: "Done."},
	}}
	got, err := task.GoldenTurns(tk, toolcall.RenderCall)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Let me look.\n<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT 1\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"run_linter\", \"arguments\": {\"path\": \"a.sql\"}}\n</tool_call>",
		"Done.<|im_end|>",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("GoldenTurns =\n%q\nwant\n%q", got, want)
	}
	bad := &task.Task{ID: "b", Golden: []chat.Message{{Role: "assistant", Content: "too early"}, {Role: "assistant", Content: "x"}}}
	if _, err := task.GoldenTurns(bad, toolcall.RenderCall); err == nil {
		t.Error("an answer before the last message was accepted")
	}
	if _, err := task.GoldenTurns(&task.Task{ID: "e"}, toolcall.RenderCall); err == nil {
		t.Error("a task without golden turns was accepted")
	}
}
