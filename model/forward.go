package model

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// Forward runs the full forward pass over a batch of token rows of equal
// length (left or right padding marked 0 in attentionMask) and returns the
// logits [B, T, V] and the per-token log-probs [B, T]:
// tokenLogProbs[b][t] = log p(tokens[b][t] | tokens[b][<t]), 0 where
// undefined (the first position and padding). Positions are
// cumsum(attentionMask) - 1, as transformers' generate computes them. It is
// what other implementations are compared with (mcprl model forward).
func (m *Model) Forward(tokens, attentionMask [][]int32) (logits, tokenLogProbs *tensors.Tensor, err error) {
	if len(tokens) == 0 || len(tokens) != len(attentionMask) {
		return nil, nil, fmt.Errorf("forward: %d token rows and %d mask rows; want the same number, at least one", len(tokens), len(attentionMask))
	}
	for b := range tokens {
		if len(tokens[b]) != len(tokens[0]) || len(attentionMask[b]) != len(tokens[0]) {
			return nil, nil, fmt.Errorf("forward: row %d has %d tokens and %d mask values; row 0 has %d tokens", b, len(tokens[b]), len(attentionMask[b]), len(tokens[0]))
		}
		for t, id := range tokens[b] {
			if id < 0 || int(id) >= m.Config.VocabSize {
				return nil, nil, fmt.Errorf("forward: row %d position %d: token id %d is outside the vocabulary [0, %d)", b, t, id, m.Config.VocabSize)
			}
		}
	}
	exec, err := mlctx.NewExec(m.Backend, m.Ctx, func(ctx *mlctx.Context, tokens, mask *graph.Node) []*graph.Node {
		return []*graph.Node{m.Logits(ctx, tokens, mask), m.TokenLogProbs(ctx, tokens, mask)}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("forward graph: %w", err)
	}
	res, err := exec.Exec(tensors.FromValue(tokens), tensors.FromValue(attentionMask))
	if err != nil {
		return nil, nil, fmt.Errorf("forward: %w", err)
	}
	return res[0], res[1], nil
}
