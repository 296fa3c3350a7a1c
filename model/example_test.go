package model_test

import (
	"context"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	"github.com/mcprl/mcprl/model"
)

// A training step built on TokenLogProbs: the negative log-likelihood of the masked tokens, differentiated by
// GoMLX and applied with AdamW. A GRPO loss is built the same way from TokenLogProbsAt, old log-probs and
// advantages (all [B, T] aligned with the tokens).
func ExampleModel_TokenLogProbs() {
	backend, _ := model.NewBackend("")
	cfg := model.TinyConfig(64, 1, 2) // a smaller model than the default, to keep the example fast
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 64, 128, 2
	m, _ := model.New(backend, cfg, 0)
	// Two sequences, left-padded to the bucket length 16; the loss covers the tokens after each prompt.
	seqs := [][]int{{1, 40, 41, 42, 43, 44, 2}, {1, 50, 51, 52, 2}}
	lossMask := [][]float32{{0, 0, 1, 1, 1, 1, 1}, {0, 0, 1, 1, 1}}
	tokens, mask, _ := model.PadBatch(seqs, 0, 0, true)
	weights, _ := model.PadFloats(lossMask, tokens.Shape().Dim(1), true)

	opt := optimizers.Adam().LearningRate(1e-2).WeightDecay(0.01).Done()
	step, _ := mlctx.NewExec(backend, m.Ctx, func(ctx *mlctx.Context, tokens, mask, weights *graph.Node) *graph.Node {
		logp := m.TokenLogProbs(ctx, tokens, mask) // [B, T]
		loss := graph.Div(graph.Neg(graph.ReduceAllSum(graph.Mul(logp, weights))), graph.ReduceAllSum(weights))
		opt.UpdateGraph(ctx, tokens.Graph(), loss)
		return loss
	})
	var first, last float32
	for i := range 30 {
		out, err := step.Exec(tokens, mask, weights)
		if err != nil {
			panic(err)
		}
		last = out[0].Value().(float32)
		if i == 0 {
			first = last
		}
	}
	fmt.Printf("loss fell: %v\n", last < first/2)

	// The trained model now continues the first prompt as it was taught.
	s, _ := m.NewSession(1, 64, 0)
	defer s.Close()
	_ = s.Append(context.Background(), [][]int{{1, 40}})
	c, _ := s.Generate(context.Background(), model.SampleOptions{MaxNewTokens: 8, Stop: m.Config.EOSIDs()})
	fmt.Println(c[0].Tokens, c[0].Stop)
	// Output:
	// loss fell: true
	// [41 42 43 44 2] stop
}
