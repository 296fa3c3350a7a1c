package eval_test

import (
	"context"
	"testing"

	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/train"
)

// OpenGolden sizes a golden replay to hold the longest golden (tool rounds
// and, unless the user chose it, the token budget) and replays every task
// of the loaded inputs successfully.
func TestOpenGolden(t *testing.T) {
	ctx := context.Background()
	ws, err := inputs.LoadTasksWith(ctx, "", inputs.Options{Inputs: train.Inputs{Tasks: customerTasks, Fixtures: fixturesDir}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	iters, err := eval.GoldenIterations(ws.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	cfg := eval.Config{Samples: 1, K: 1, MaxCompletionLength: 64, MaxToolCallingIterations: 1}
	for _, keep := range []bool{false, true} {
		ev, err := eval.OpenGolden(ws, cfg, keep, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantLength := eval.GoldenCompletionLength
		if keep {
			wantLength = 64
		}
		if c := ev.Config; c.MaxToolCallingIterations != max(iters, 1) || c.MaxCompletionLength != wantLength || ev.Sandboxes == nil || ev.Template == nil {
			t.Errorf("keep %v: config %+v", keep, c)
		}
		if keep {
			continue
		}
		_, rep, err := ev.Evaluate(ctx, ws.Tasks)
		if err != nil {
			t.Fatal(err)
		}
		if rep.SuccessRate != 1 || rep.NTasks != len(ws.Tasks) {
			t.Errorf("golden replay: %+v", rep.Metrics)
		}
	}
}
