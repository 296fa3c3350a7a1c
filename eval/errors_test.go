package eval_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/task"
)

// TestSummarizeLeavesErrorsOut: issue 29's case: one task whose server
// failed must not read as a failure of the policy. The scored trajectories
// all succeeded, so success and pass@k are 100%; the failures are counted
// in n_errors; a task with fewer than k scored trajectories is left out of
// pass@k; with every trajectory failed, no rate is defined.
func TestSummarizeLeavesErrorsOut(t *testing.T) {
	a, b, c := &task.Task{ID: "a", GroundTruthAssertions: []string{"x"}}, &task.Task{ID: "b", GroundTruthAssertions: []string{"x"}},
		&task.Task{ID: "c", GroundTruthAssertions: []string{"x"}}
	ok := func(tk *task.Task, i int) *eval.Sample {
		return &eval.Sample{Task: tk, Index: i, Trajectory: &chat.Trajectory{Turns: []chat.Turn{{Text: "x"}}}, Assertions: reward.Score{Value: 1}}
	}
	failed := func(tk *task.Task, i int) *eval.Sample {
		return &eval.Sample{Task: tk, Index: i, Trajectory: &chat.Trajectory{Error: "policy: HTTP 500"}, ScoreError: "not scored: policy: HTTP 500"}
	}
	samples := []*eval.Sample{ok(a, 0), ok(a, 1), ok(b, 0), ok(b, 1), failed(c, 0), failed(c, 1)}
	rep, err := eval.Summarize(samples, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rep.SuccessRate != 1 || rep.PassAtK != 1 || rep.MeanTurns != 1 || rep.NErrors != 2 || rep.NScored != 4 || rep.NTrajectories != 6 || rep.NTasks != 3 {
		t.Errorf("report %+v, want success and pass@2 100%% over the 4 scored, 2 errors", rep.Metrics)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if lines := strings.Split(table.String(), "\n"); !strings.Contains(lines[0], "errors") || !strings.Contains(lines[1], " 2 ") {
		t.Errorf("table shows no errors:\n%s", table.String())
	}
	// One of b's two failed: b has 1 scored trajectory, below k=2.
	samples[3] = failed(b, 1)
	if rep, err = eval.Summarize(samples, 2); err != nil {
		t.Fatal(err)
	}
	if rep.PassAtK != 1 || rep.SuccessRate != 1 || rep.NErrors != 3 {
		t.Errorf("report %+v, want pass@2 over task a only", rep.Metrics)
	}
	all := []*eval.Sample{failed(a, 0), failed(b, 0)}
	if rep, err = eval.Summarize(all, 1); err != nil {
		t.Fatal(err)
	}
	if rep.SuccessRate.Defined() || rep.PassAtK.Defined() || rep.NErrors != 2 || rep.NScored != 0 {
		t.Errorf("every trajectory failed: %+v", rep.Metrics)
	}
}

// FirstError names the first failed sample; SaveWithPage writes the
// trajectories, the report and the page to look at, and says where.
func TestFirstErrorAndSaveWithPage(t *testing.T) {
	a := &task.Task{ID: "a", GroundTruthAssertions: []string{"x"}}
	ok := &eval.Sample{Task: a, Trajectory: &chat.Trajectory{Turns: []chat.Turn{{Text: "x"}}}, Assertions: reward.Score{Value: 1}}
	failed := &eval.Sample{Task: a, Index: 1, Trajectory: &chat.Trajectory{Error: "policy: HTTP 500"}, ScoreError: "not scored: policy: HTTP 500"}
	if got := eval.FirstError([]*eval.Sample{ok}); got != "" {
		t.Errorf("no failure: %q", got)
	}
	if got := eval.FirstError([]*eval.Sample{ok, failed}); !strings.HasPrefix(got, "a (sample 1): ") || !strings.Contains(got, "HTTP 500") {
		t.Errorf("FirstError: %q", got)
	}
	samples := []*eval.Sample{ok, failed}
	rep, err := eval.Summarize(samples, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	var log strings.Builder
	if err := eval.SaveWithPage(dir, samples, rep, &log); err != nil {
		t.Fatal(err)
	}
	if want := "eval: trajectories in " + filepath.Join(dir, "trajectories.jsonl") + "\neval: report in " + filepath.Join(dir, "report.html") + "\n"; log.String() != want {
		t.Errorf("log %q, want %q", log.String(), want)
	}
	for _, f := range []string{"trajectories.jsonl", "report.json", "report.html"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// ConfigOf takes a model's sampling settings (4 tool rounds where they set
// no limit), and Rollout hands them to one trajectory per task.
func TestConfigOf(t *testing.T) {
	two := 2
	s := &sampling.Settings{Temperature: 0.6, TopP: 0.9, TopK: 5, MaxPromptLength: 512, MaxCompletionLength: 192, MaxToolCallingIterations: &two}
	c := eval.ConfigOf(s, 7)
	if c.MaxPromptLength != 512 || c.MaxCompletionLength != 192 || c.MaxToolCallingIterations != 2 ||
		c.Sample.Temperature != 0.6 || c.Sample.TopP != 0.9 || c.Sample.TopK != 5 || c.Sample.Seed != 7 {
		t.Errorf("%+v", c)
	}
	r := c.Rollout()
	if r.NumGenerations != 1 || r.MaxCompletionLength != 192 || r.MaxToolCallingIterations != 2 || r.Sample.Temperature != 0.6 || r.Sample.Seed != 7 {
		t.Errorf("rollout %+v", r)
	}
	if c := eval.ConfigOf(&sampling.Settings{}, 0); c.MaxToolCallingIterations != 4 {
		t.Errorf("no round limit: %d", c.MaxToolCallingIterations)
	}
}
