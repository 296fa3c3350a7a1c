package grpo_test

import (
	"fmt"

	"github.com/gomlx/gomlx/backends/simplego"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/grpo"
)

// ExampleLoss builds TRL's default (dapo) loss for two completions of three tokens, the second with a
// tool-output token (mask 0), and differentiates it with respect to the policy's log-probabilities.
// The second completion's first token has ratio exp(-1) < 1-epsilon with a negative advantage: it is
// clipped and gets no gradient; the tool-output token gets none either.
func ExampleLoss() {
	backend, err := simplego.New("ops_sequential") // v0.26.0 parallel op scheduling is racy (go test -race)
	if err != nil {
		panic(err)
	}
	cfg := grpo.Default()
	lossCfg := cfg.LossConfig()
	exec, err := NewExec(backend, func(logp, old, mask, adv, numItems *Node) (*Node, *Node) {
		out, err := grpo.Loss(lossCfg, grpo.LossInputs{
			LogP: logp, OldLogP: old, Mask: mask, Advantages: adv, NumItemsInBatch: numItems,
		})
		if err != nil {
			panic(err)
		}
		return out.Loss, Gradient(out.Loss, logp)[0]
	})
	if err != nil {
		panic(err)
	}
	logp := [][]float32{{-0.5, -1.0, -0.2}, {-2.0, -0.1, -0.7}}
	old := [][]float32{{-0.6, -1.0, -0.2}, {-1.0, -0.1, -0.9}}
	mask := [][]float32{{1, 1, 1}, {1, 0, 1}} // 0: a tool observation, not sampled by the policy
	adv := []float32{1, -1}
	outs, err := exec.Exec(logp, old, mask, adv, float32(5)) // 5 sampled tokens in the generation batch
	if err != nil {
		panic(err)
	}
	fmt.Printf("loss %.4f\n", outs[0].Value())
	fmt.Printf("d loss/d logp %.4f\n", tensors.MustCopyFlatData[float32](outs[1]))
	// Output:
	// loss -0.2168
	// d loss/d logp [-0.2210 -0.2000 -0.2000 -0.0000 0.0000 0.2443]
}
