package eval_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/task"
)

// ForGolden gives a golden replay the rounds its longest golden needs and
// a token budget of at least GoldenCompletionLength, unless the budget was
// chosen; Evaluate runs, summarizes and says how long it took.
func TestForGoldenAndEvaluate(t *testing.T) {
	tasks, factories := loadTasks(t, "../examples/customers/quick_tasks.jsonl", "")
	tasks = tasks[:2]
	gi, err := eval.GoldenIterations(tasks)
	if err != nil {
		t.Fatal(err)
	}
	c := eval.Config{MaxCompletionLength: 64, MaxToolCallingIterations: 0}
	if err := c.ForGolden(tasks, true); err != nil || c.MaxCompletionLength != 64 || c.MaxToolCallingIterations != gi {
		t.Errorf("keepLength: %+v, %v", c, err)
	}
	if err := c.ForGolden(tasks, false); err != nil || c.MaxCompletionLength != eval.GoldenCompletionLength {
		t.Errorf("budget: %+v, %v", c, err)
	}
	ev := goldenEvaluator(t, tasks, factories, 2)
	var progress bytes.Buffer
	ev.Progress = &progress
	res, rep, err := ev.Evaluate(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || rep.NTasks != 2 || rep.NErrors != 0 || eval.AllFailed(res, rep) != nil {
		t.Errorf("%d samples, report %+v", len(res), rep.Metrics)
	}
	if !regexp.MustCompile(`(?m)^eval: 2 tasks x 2 samples in [0-9.]+s$`).MatchString(progress.String()) {
		t.Errorf("progress: %q", progress.String())
	}
}

// AllFailed is an error only when no trajectory was scored.
func TestAllFailed(t *testing.T) {
	a := &task.Task{ID: "a", GroundTruthAssertions: []string{"x"}}
	ok := &eval.Sample{Task: a, Trajectory: &chat.Trajectory{Turns: []chat.Turn{{Text: "x"}}}, Assertions: reward.Score{Value: 1}}
	failed := &eval.Sample{Task: a, Index: 1, Trajectory: &chat.Trajectory{Error: "policy: HTTP 500"}, ScoreError: "not scored: policy: HTTP 500"}
	for _, c := range []struct {
		samples []*eval.Sample
		want    string
	}{
		{[]*eval.Sample{ok}, ""},
		{[]*eval.Sample{ok, failed}, ""},
		{[]*eval.Sample{failed}, "eval: every trajectory failed (1); the first: a (sample 1): "},
	} {
		rep, err := eval.Summarize(c.samples, 1)
		if err != nil {
			t.Fatal(err)
		}
		err = eval.AllFailed(c.samples, rep)
		if (err == nil) != (c.want == "") || err != nil && !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%d samples: %v, want %q", len(c.samples), err, c.want)
		}
	}
}
