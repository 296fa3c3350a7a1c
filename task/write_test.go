package task_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/task"
)

// WriteFile creates the file's directory and writes what WriteJSONL
// writes; task.Load reads it back.
func TestWriteFile(t *testing.T) {
	tasks := []task.Task{
		{ID: "a", Task: "Count.", Fixture: "customers", Golden: []chat.Message{{Role: "assistant", Content: "1"}}},
		{ID: "b", Task: "List.", Fixture: "customers"},
	}
	path := filepath.Join(t.TempDir(), "new", "dir", "distilled.jsonl")
	if err := task.WriteFile(path, tasks); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := task.WriteJSONL(&want, tasks); err != nil {
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
	if err := task.WriteFile(filepath.Join(path, "under-a-file.jsonl"), tasks); err == nil {
		t.Error("wrote under a file")
	}
}

// WriteJSONL writes what encoding/json writes without HTML escaping, field
// order included, where the golden calls' arguments are compact; spaced
// arguments keep their bytes.
func TestWriteJSONLAsEncodingJSON(t *testing.T) {
	tk := task.Task{ID: "a", SystemPrompt: "<sys>", Task: "Count & list.", GroundTruthAssertions: []string{"SELECT 1"},
		StateAssertions: []string{"SELECT 2"}, Fixture: "customers", Category: "count", Golden: []chat.Message{
			{Role: "assistant", ToolCalls: []chat.Call{{Name: "query_database", Arguments: json.RawMessage(`{"sql":"SELECT 1"}`)}}},
			{Role: "tool", Name: "query_database", Content: "1"}, {Role: "assistant", Content: "One."}}}
	var got, want bytes.Buffer
	if err := task.WriteJSONL(&got, []task.Task{tk}); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&tk); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("WriteJSONL\n%s\nencoding/json\n%s", got.String(), want.String())
	}
	tk.Golden[0].ToolCalls[0].Arguments = json.RawMessage(`{"sql": "SELECT 1"}`)
	got.Reset()
	if err := task.WriteJSONL(&got, []task.Task{tk}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.String(), `"arguments":{"sql": "SELECT 1"}`) {
		t.Errorf("spaced arguments not kept: %s", got.String())
	}
}
