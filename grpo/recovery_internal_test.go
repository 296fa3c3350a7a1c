package grpo

import (
	"slices"
	"testing"

	"github.com/mcprl/mcprl/chat"
)

// Branch micro-batches are spread over a cycle's optimizer steps so that
// each is trained as often as the root groups' micro-batches.
func TestStepMicroBatches(t *testing.T) {
	gen := &generation{baseMicroBatches: 4, trajs: make([]*chat.Trajectory, 2*7)} // bs 2: 4 root, 3 branch micro-batches
	// ga 2: one pass over the roots is 2 steps; with num_iterations 2 the cycle is 4 steps.
	want := [][]int{{0, 1, 4, 6}, {2, 3, 5}, {0, 1, 4, 6}, {2, 3, 5}}
	for offset, w := range want {
		if got := gen.stepMicroBatches(offset, 2, 2); !slices.Equal(got, w) {
			t.Errorf("step %d: micro-batches %v, want %v", offset, got, w)
		}
	}
	// Without branches a step trains its ga micro-batches, as before.
	gen.trajs = gen.trajs[:8]
	if got := gen.stepMicroBatches(1, 2, 2); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("no branches: %v", got)
	}
}
