package rollout_test

import (
	"context"
	"testing"

	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/rollout"
)

// TestScript: a script's turns come back in order, cut at a stop id or the
// budget, whatever was appended.
func TestScript(t *testing.T) {
	r := &rollout.Script{Scripts: [][][]int{{{1, 2, 9, 3}, {4, 5}}}}
	b, err := r.NewBatch(context.Background(), [][]int{{7}, {8}}, policy.SampleOptions{StopIDs: []int{9}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Generate(context.Background(), []int{10, 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(out[0].IDs) != 3 || !out[0].Stopped || len(out[1].IDs) != 1 || out[1].Stopped {
		t.Errorf("first turn: %+v", out)
	}
	out, _ = b.Generate(context.Background(), []int{10, 10})
	if len(out[0].IDs) != 2 || out[0].Stopped || out[0].IDs[0] != 4 {
		t.Errorf("second turn: %+v", out)
	}
	out, _ = b.Generate(context.Background(), []int{10, 10})
	if len(out[0].IDs) != 0 {
		t.Errorf("past the script: %+v", out)
	}
}
