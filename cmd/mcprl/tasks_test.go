package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/taskgen"
)

// TestTasksGenerateCmd runs `mcprl tasks generate` twice with one seed and
// once with another: the files load strictly with task.Load against the
// fixture, the same seed writes the same bytes, another seed other tasks.
func TestTasksGenerateCmd(t *testing.T) {
	dir := t.TempDir()
	fixture := filepath.Join("..", "..", "examples", "fixtures", "customers")
	run := func(out, seed string, extra ...string) []byte {
		t.Helper()
		root := newRootCmd()
		var stderr bytes.Buffer
		root.SetErr(&stderr)
		root.SetArgs(append([]string{"tasks", "generate", "--fixture", fixture, "--out", out, "--n", "30", "--seed", seed}, extra...))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stderr.String(), "wrote 30 tasks for fixture customers") {
			t.Errorf("stderr: %q", stderr.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := run(filepath.Join(dir, "a.jsonl"), "4")
	b := run(filepath.Join(dir, "b.jsonl"), "4")
	c := run(filepath.Join(dir, "c.jsonl"), "5")
	if !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Errorf("same seed equal: %v, different seeds equal: %v", bytes.Equal(a, b), bytes.Equal(a, c))
	}
	fx, err := task.LoadFixture(fixture)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := task.Load(filepath.Join(dir, "a.jsonl"), task.LoadOptions{Fixtures: map[string]*task.Fixture{fx.Name: fx}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 30 || tasks[0].SystemPrompt != "" {
		t.Fatalf("%d tasks, first system prompt %q", len(tasks), tasks[0].SystemPrompt)
	}
	// Edge cases are marked: a category naming the edge case, no golden.
	edge := 0
	for _, tk := range tasks {
		if taskgen.IsEdgeCase(tk.Category) != (len(tk.Golden) == 0) {
			t.Errorf("%s (%s): golden of %d messages", tk.ID, tk.Category, len(tk.Golden))
		}
		if len(tk.Golden) == 0 {
			edge++
		}
	}
	if edge == 0 || edge == len(tasks) {
		t.Errorf("%d of %d tasks are edge cases", edge, len(tasks))
	}
	// --system-prompt sets every task's system prompt and nothing else.
	run(filepath.Join(dir, "s.jsonl"), "4", "--system-prompt", "Use query_database.")
	withPrompt, err := task.Load(filepath.Join(dir, "s.jsonl"), task.LoadOptions{Fixtures: map[string]*task.Fixture{fx.Name: fx}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tk := range withPrompt {
		if tk.SystemPrompt != "Use query_database." || tk.Task != tasks[i].Task {
			t.Fatalf("task %d: system prompt %q, task %q (without the flag: %q)", i, tk.SystemPrompt, tk.Task, tasks[i].Task)
		}
	}
	root := newRootCmd()
	root.SetArgs([]string{"tasks", "generate", "--out", filepath.Join(dir, "d.jsonl")})
	if err := root.Execute(); err == nil {
		t.Error("no error without --fixture")
	}
}
