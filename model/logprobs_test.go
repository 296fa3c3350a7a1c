package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// gradModel is the tiny model the log-prob and gradient tests differentiate: two layers of width 32, 4 query and
// 2 key-value heads, a vocabulary of 300, weights drawn at InitializerRange 0.3 (peaked distributions, large
// gradients) from seed 7, the output projection tied to the embedding or not.
func gradModel(t *testing.T, backend backends.Backend, tied bool) *Model {
	t.Helper()
	cfg := TinyConfig(300, 1, 2)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 32, 48, 2
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 4, 2
	cfg.TieWordEmbeddings = tied
	cfg.InitializerRange = 0.3
	m, err := New(backend, cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// gradBatch is the batch those tests score: three sequences of 9, 4 and 7 tokens, padded to 12 positions on the
// left or on the right.
func gradBatch(t *testing.T, left bool) (tokens, mask *tensors.Tensor) {
	t.Helper()
	tokens, mask, err := PadBatch([][]int{{5, 17, 250, 3, 99, 140, 7, 7, 201}, {11, 12, 13, 14}, {280, 1, 2, 3, 4, 5, 6}}, 12, 0, left)
	if err != nil {
		t.Fatal(err)
	}
	return tokens, mask
}

// valueAndGradients runs out, a graph of tokens and mask built with m's context, and returns its values and the
// gradients of sum(out * cos(iota)) (a loss that weighs every entry differently) w.r.t. every trainable variable,
// by scope and name.
func valueAndGradients(t *testing.T, m *Model, tokens, mask *tensors.Tensor, out func(ctx *context.Context, tokens, mask *graph.Node) *graph.Node) ([]float32, map[string][]float32) {
	t.Helper()
	var names []string
	e, err := context.NewExec(m.Backend, m.Ctx, func(ctx *context.Context, tokens, mask *graph.Node) []*graph.Node {
		g := tokens.Graph()
		y := out(ctx, tokens, mask)
		loss := graph.ReduceAllSum(graph.Mul(y, graph.Cos(graph.IotaFull(g, shapes.Make(dtypes.Float32, y.Shape().Dimensions...)))))
		var vars []*graph.Node
		names = names[:0]
		for v := range ctx.IterVariables() {
			if v.Trainable {
				vars = append(vars, v.ValueGraph(g))
				names = append(names, v.ScopeAndName())
			}
		}
		return append([]*graph.Node{y}, graph.Gradient(loss, vars...)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Exec(tokens, mask)
	if err != nil {
		t.Fatal(err)
	}
	grads := map[string][]float32{}
	for i, name := range names {
		grads[name] = tensors.MustCopyFlatData[float32](res[1+i])
	}
	return tensors.MustCopyFlatData[float32](res[0]), grads
}

// logProbsAndGradients is valueAndGradients of lp, the log-probs of tokens from position from on (chunked with
// rows positions per chunk, or from the full logits when rows is 0, zeroed before from), zero at position 0 and
// wherever a token or its predecessor is padding.
func logProbsAndGradients(t *testing.T, m *Model, tokens, mask *tensors.Tensor, temperature float64, rows, from int) (lp []float32, grads map[string][]float32) {
	t.Helper()
	return valueAndGradients(t, m, tokens, mask, func(ctx *context.Context, tokens, mask *graph.Node) *graph.Node {
		g := tokens.Graph()
		seq := tokens.Shape().Dim(1)
		valid, positions := maskAndPositions(mask)
		h := m.decoder(ctx, tokens, positions, causalAllowed(valid), nil)
		var out *graph.Node
		if rows == 0 {
			out = denseTokenLogProbs(m.lmHead(ctx, h), tokens, temperature)
			before := graph.LessThan(graph.Iota(g, shapes.Make(dtypes.Int32, out.Shape().Dimensions...), 1), graph.Const(g, int32(from)))
			out = graph.Where(before, graph.ZerosLike(out), out)
		} else {
			w, ok := m.outputWeight(ctx, g)
			if !ok {
				t.Fatal("no output weight")
			}
			out = tokenLogProbs(rmsNorm(ctx.In("model").In("norm"), h, m.Config.RMSNormEps), w, tokens, temperature, rows, from)
		}
		// Position 0 is undefined (the two paths differ there); the rest is defined for every real pair.
		ok := graph.And(graph.SliceAxis(valid, 1, graph.AxisRange(1)), graph.SliceAxis(valid, 1, graph.AxisRange(0, seq-1)))
		ok = graph.Concatenate([]*graph.Node{graph.ZerosLike(graph.SliceAxis(valid, 1, graph.AxisRange(0, 1))), ok}, 1)
		return graph.Where(ok, out, graph.ZerosLike(out))
	})
}

// TestChunkedLogProbs: the chunked log-probs and their custom gradient equal log_softmax over the full
// [B, T, vocab] logits followed by a pick, differentiated by GoMLX op by op, for every trainable variable: tied
// and untied output projections, temperature 1 and 0.7, chunks of 1 row, a size that leaves a partial last
// chunk, and the whole batch in one; left- and right-padded rows; with a LoRA adapter (output projection
// frozen, its gradient never asked for); and from positions 1, 2 and 7 on only (TokenLogProbsFrom), against the
// full computation with the earlier positions zeroed. The two paths multiply by lm_head in chunks of other shapes
// and reduce the vocabulary in another order, so each log-prob may round differently: by a few float32
// roundings of a hidden-size dot product and a vocabulary-size sum, growing as a random walk
// (4·eps32·(√hidden + √vocab) of 1+|log-prob|), and each gradient entry by those plus the sum over the batch's
// positions, of the largest entry of its variable's gradient.
func TestChunkedLogProbs(t *testing.T) {
	backend := testBackend(t)
	for _, tc := range []struct {
		tied bool
		temp float64
		lora bool
	}{{true, 1, false}, {false, 0.7, false}, {true, 0.7, true}} {
		t.Run(fmt.Sprintf("tied=%v,temperature=%v,lora=%v", tc.tied, tc.temp, tc.lora), func(t *testing.T) {
			m := gradModel(t, backend, tc.tied)
			if tc.lora {
				if err := m.AddLoRA(LoRAConfig{R: 4, Alpha: 8, TargetModules: []string{"q_proj", "v_proj", "down_proj"}}, 3); err != nil {
					t.Fatal(err)
				}
			}
			for i, left := range []bool{false, true} {
				tokens, mask := gradBatch(t, left)
				for _, from := range []int{0, 1, 2, 7} {
					wantLP, wantGrads := logProbsAndGradients(t, m, tokens, mask, tc.temp, 0, from)
					for _, rows := range []int{1, 5, 36, 1000} {
						if from > 0 && rows != 5 && rows != 1000 {
							continue
						}
						gotLP, gotGrads := logProbsAndGradients(t, m, tokens, mask, tc.temp, rows, from)
						what := fmt.Sprintf("padding %d, from %d, rows %d", i, from, rows)
						maxLP, maxG := chunkedWithin(t, &m.Config, tokens.Shape().Size(), gotLP, wantLP, gotGrads, wantGrads, what)
						t.Logf("left=%v from=%d rows=%d: max |diff| log-probs %.2g, gradients %.2g", left, from, rows, maxLP, maxG)
					}
				}
			}
		})
	}
}

// chunkedWithin fails unless the chunked log-probs and gradients (got) are those from the full logits (want) within
// TestChunkedLogProbs' bounds, for a model of cfg and a batch of positions tokens, and returns the largest
// absolute differences of the log-probs and of the gradients.
func chunkedWithin(t *testing.T, cfg *Config, positions int, gotLP, wantLP []float32, gotGrads, wantGrads map[string][]float32, what string) (maxLP, maxG float64) {
	t.Helper()
	if len(wantGrads) == 0 || len(gotGrads) != len(wantGrads) {
		t.Fatalf("%s: %d gradients, want %d (> 0)", what, len(gotGrads), len(wantGrads))
	}
	d, v, p := float64(cfg.HiddenSize), float64(cfg.VocabSize), float64(positions)
	lpTol := 4 * eps32 * (math.Sqrt(d) + math.Sqrt(v))
	maxLP = maxDiff(t, gotLP, wantLP, func(w float64) float64 { return lpTol * (1 + math.Abs(w)) }, what+": log-probs")
	for name, want := range wantGrads {
		scale := 0.0
		for _, w := range want {
			scale = max(scale, math.Abs(float64(w)))
		}
		gradTol := 4 * eps32 * (math.Sqrt(d) + math.Sqrt(v) + math.Sqrt(p)) * scale
		maxG = max(maxG, maxDiff(t, gotGrads[name], want, func(float64) float64 { return gradTol }, what+": gradient of "+name))
	}
	return maxLP, maxG
}

// maxDiff fails when got and want differ anywhere by more than bound(want) and returns the largest absolute
// difference.
func maxDiff(t *testing.T, got, want []float32, bound func(want float64) float64, what string) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for j := range want {
		d := math.Abs(float64(got[j] - want[j]))
		if math.IsNaN(d) || d > bound(float64(want[j])) {
			t.Fatalf("%s [%d]: got %v, want %v", what, j, got[j], want[j])
		}
		worst = max(worst, d)
	}
	return worst
}
