package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/task"
)

// tasks distill with the customers base model as an in-process teacher
// (the same eval.PolicyFor interface a served teacher goes through): the
// kept trajectories are golden trajectories that load as tasks, and
// replayed against live sandboxes (eval --golden, the replay sft trains on)
// every one of them passes its assertions.
func TestTasksDistill(t *testing.T) {
	out := filepath.Join(t.TempDir(), "distilled.jsonl")
	_, stderr, err := runCmd("tasks", "distill", "--model", customersBase, "--tasks", "../../examples/customers/quick_tasks.jsonl",
		"--fixtures", fixturesRoot, "--k", "2", "--per-task", "2", "--temperature", "0.7", "--max-completion-length", "192", "--out", out)
	if err != nil {
		t.Fatalf("distill: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "distill: wrote ") || !strings.Contains(stderr, "of 8 tasks got a demonstration") {
		t.Errorf("no summary:\n%s", stderr)
	}
	fx, err := task.LoadFixtures(fixturesRoot)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := task.Load(out, task.LoadOptions{Fixtures: fx})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 4 {
		t.Fatalf("%d demonstrations kept of 16 trajectories; the base model solves most quick tasks", len(tasks))
	}
	for _, tk := range tasks {
		if len(tk.Golden) < 3 || !strings.HasPrefix(tk.ID, "quick-") {
			t.Errorf("%s: golden %+v", tk.ID, tk.Golden)
		}
	}
	stdout, stderr, err := runCmd("eval", "--golden", "--tasks", out, "--fixtures", fixturesRoot, "--json")
	if err != nil {
		t.Fatalf("eval --golden: %v\n%s", err, stderr)
	}
	var rep struct {
		SuccessRate float64 `json:"success_rate"`
		NTasks      int     `json:"n_tasks"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.SuccessRate != 1 || rep.NTasks != len(tasks) {
		t.Errorf("replayed goldens: %s (%v), want every one of %d to succeed", stdout, err, len(tasks))
	}

	// A teacher is required, and only one.
	if _, _, err := runCmd("tasks", "distill", "--tasks", out, "--fixtures", fixturesRoot, "--out", out+"2"); err == nil || !strings.Contains(err.Error(), "give the teacher") {
		t.Errorf("no teacher: %v", err)
	}
}
