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

// A multi-turn rollout: prompts of different lengths are fed once, each sequence samples until a stop id
// (here </tool_call>'s stand-in 7 or EOS) or its budget, tool output is appended to the sequences that called a
// tool, and sampling continues from the cache; nothing already sampled is re-encoded.
func ExampleSession() {
	backend, _ := model.NewBackend("")
	cfg := model.TinyConfig(64, 1, 2)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 64, 128, 2
	m, _ := model.New(backend, cfg, 0)
	ctx := context.Background()

	s, _ := m.NewSession(2, 256, 42) // 2 sequences, 256 cache slots, seed 42
	defer s.Close()
	_ = s.Append(ctx, [][]int{{1, 10, 11, 12}, {1, 20}})
	opts := model.SampleOptions{Temperature: 1, TopP: 0.95, MaxNewTokensPer: []int{6, 4}, Stop: []int{2, 7}}
	turn1, _ := s.Generate(ctx, opts)
	for i, c := range turn1 {
		fmt.Println(i, len(c.Tokens) == len(c.LogProbs), c.Stop != "")
	}
	// Tool output for sequence 0 only; sequence 1 stays finished.
	_ = s.Append(ctx, [][]int{{30, 31, 32}, nil})
	turn2, _ := s.Generate(ctx, model.SampleOptions{Temperature: 1, MaxNewTokens: 5, Stop: []int{2}})
	fmt.Println(len(turn2[0].Tokens) > 0, turn2[1].Stop == "")
	fmt.Println(len(s.Tokens(0)) == 4+len(turn1[0].Tokens)+3+len(turn2[0].Tokens))
	// Output:
	// 0 true true
	// 1 true true
	// true true
	// true
}

// A LoRA adapter as training logs and mcprl model merge describe it.
func ExampleLoRAConfig_String() {
	lc := model.LoRAConfig{R: 16, Alpha: 32, Dropout: 0.05, TargetModules: []string{"q_proj", "v_proj"}}
	fmt.Println(&lc)
	lc.TrainableTokenIndices = []int{49152, 49153}
	fmt.Println(&lc)
	// Output:
	// r 16, alpha 32, dropout 0.05, [q_proj v_proj]
	// r 16, alpha 32, dropout 0.05, [q_proj v_proj], trainable tokens [49152 49153]
}

// A model's shape as mcprl model init, import and info print it: the tiny default at vocab 2,048 has
// 4 x 738,304 parameters in its layers (attention with biases, MLP, norms), 524,288 in the tied embedding and
// 256 in the final norm.
func ExampleConfig_Summary() {
	cfg := model.TinyConfig(2048, -1, 2)
	fmt.Println(cfg.Summary())
	// Output:
	// Qwen2ForCausalLM, 3477760 parameters (hidden 256, intermediate 704, 4 layers, 4 heads / 2 KV, vocab 2048, rope_theta 1e+06, tied true, eos [2])
}
