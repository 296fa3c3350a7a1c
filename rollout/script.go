package rollout

import (
	"context"
	"fmt"

	"github.com/mcprl/mcprl/policy"
)

// Script is a scripted policy: sequence i of a batch answers its turns with
// Scripts[i mod len(Scripts)], one token list per turn, whatever the
// observations were. It drives rollouts of golden trajectories and of
// recorded completions (mcprl score, eval of a golden agent).
type Script struct {
	Scripts [][][]int
}

// NewBatch implements policy.Policy.
func (r *Script) NewBatch(ctx context.Context, prompts [][]int, opts policy.SampleOptions) (policy.Batch, error) {
	if len(r.Scripts) == 0 {
		return nil, fmt.Errorf("script policy: no scripts")
	}
	b := &scriptBatch{stop: map[int]bool{}, turn: make([]int, len(prompts)), seqs: make([][][]int, len(prompts))}
	for i := range prompts {
		b.seqs[i] = r.Scripts[i%len(r.Scripts)]
	}
	for _, id := range opts.StopIDs {
		b.stop[id] = true
	}
	return b, nil
}

type scriptBatch struct {
	seqs [][][]int
	turn []int
	stop map[int]bool
}

func (b *scriptBatch) Generate(ctx context.Context, maxNew []int) ([]policy.Sample, error) {
	if len(maxNew) != len(b.seqs) {
		return nil, fmt.Errorf("script policy: %d budgets for %d sequences", len(maxNew), len(b.seqs))
	}
	out := make([]policy.Sample, len(b.seqs))
	for i, n := range maxNew {
		if n <= 0 || b.turn[i] >= len(b.seqs[i]) {
			continue
		}
		ids := b.seqs[i][b.turn[i]]
		b.turn[i]++
		s := policy.Sample{}
		for _, id := range ids {
			if len(s.IDs) == n {
				break
			}
			s.IDs = append(s.IDs, id)
			s.LogProbs = append(s.LogProbs, 0)
			if b.stop[id] {
				s.Stopped = true
				break
			}
		}
		out[i] = s
	}
	return out, nil
}

func (b *scriptBatch) Append(i int, tokens []int) error {
	if i < 0 || i >= len(b.seqs) {
		return fmt.Errorf("script policy: no sequence %d", i)
	}
	return nil
}

func (b *scriptBatch) Close() error { return nil }
