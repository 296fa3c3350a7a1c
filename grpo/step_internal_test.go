package grpo

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/internal/enginetest"
	"github.com/mcprl/mcprl/model"
)

// A micro-batch whose every advantage is 0 adds nothing to a GRPO step (beta 0): optimizerStep leaves its forward
// and backward passes out, and the step is the one that ran every micro-batch. Three micro-batches of four
// sequences (gradient_accumulation_steps 3): a zero one in the middle (the last still carries the AdamW update:
// loss, gradient norm, weights and metrics equal bit for bit, since the other micro-batches run through the same
// executables and the left-out one's gradient is exactly 0); a zero last one and all three zero (the update runs
// alone on the accumulated gradients, t.applyOnly: loss and metrics equal bit for bit; the gradient norm and the
// weights within float32's rounding of the update's own arithmetic, which another executable may order
// differently); the middle case again with the importance-sampling correction computed in the training graph
// (its sampling/* metrics then cover the micro-batches that ran). Each left-out micro-batch is a row of
// micro_batches/skipped_ratio 1 and clip ratios 0. On each
// engine (enginetest.Engines); on XLA, whose compilations take most of the time, only the zero last one (the
// update alone, the case where XLA's executables may round apart).
func TestZeroAdvantageMicroBatchesLeftOut(t *testing.T) {
	enginetest.Run(t, func(t *testing.T, engine string) {
		eb, err := model.OpenEngine(model.Engine(engine))
		if err != nil {
			enginetest.Unavailable(t, engine, err)
		}
		t.Cleanup(eb.Backend.Finalize)
		zeroAdvantageLeftOut(t, eb.Backend, engine != "xla")
	})
}

func zeroAdvantageLeftOut(t *testing.T, be backends.Backend, all bool) {
	const bs, micro, prompt, completion = 4, 3, 16, 48
	length := prompt + completion
	names := []string{"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight", "model.norm.weight"}
	const lr = 1e-3
	type result struct {
		loss, norm float64
		metrics    map[string]float64 // summed over the rows
		rows       int
		weights    [][]float32
		elems      int // trainable elements
	}
	step := func(zero []bool, keep, is bool) (before [][]float32, r result) {
		m, err := model.New(be, model.TinyConfig(300, 1, 2), 5)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumGenerations = bs, micro, bs*micro
		cfg.LossType, cfg.MaxCompletionLength, cfg.Beta = LossDAPO, completion, 0
		cfg.VLLMImportanceSamplingCorrection = is // in the training graph: one step per generation, no dropout
		tr := &Trainer{Config: &cfg, Model: m, keepZeroAdvantage: keep}
		if err := tr.compile(); err != nil {
			t.Fatal(err)
		}
		gen := &generation{length: length, numItems: float32(bs * micro * completion), metrics: map[string]float64{}}
		for i := range bs * micro {
			tj := &chat.Trajectory{}
			for j := range length {
				tj.Tokens = append(tj.Tokens, (i*131+j*17)%300)
				tj.Mask = append(tj.Mask, uint8(min(1, j/prompt)))
				tj.OldLogProbs = append(tj.OldLogProbs, -5.7+0.01*float32(j%3)) // the sampler's, near the policy's -log(300)
			}
			gen.trajs = append(gen.trajs, tj)
			a := float64(1-2*(i%2)) * (1 + float64(i)/8)
			if zero[i/bs] {
				a = 0
			}
			gen.advantages = append(gen.advantages, a)
		}
		if is {
			gen.isRatio, _ = gen.samplingLogProbs(&cfg)
		}
		for _, n := range names {
			w, _, err := m.Tensor(n)
			if err != nil {
				t.Fatal(err)
			}
			before = append(before, w)
		}
		loss, norm, rows, err := tr.optimizerStep(gen, 0, lr)
		if err != nil {
			t.Fatal(err)
		}
		r = result{loss: loss, norm: norm, metrics: map[string]float64{}, rows: len(rows)}
		for _, v := range tr.vars {
			r.elems += v.Shape().Size()
		}
		for _, row := range rows {
			for k, v := range row {
				r.metrics[k] += v
			}
		}
		for _, n := range names {
			w, _, err := m.Tensor(n)
			if err != nil {
				t.Fatal(err)
			}
			r.weights = append(r.weights, w)
		}
		return before, r
	}
	eps := math.Nextafter32(1, 2) - 1
	for _, c := range []struct {
		name      string
		zero      []bool
		exact, is bool
	}{
		{"middle", []bool{false, true, false}, true, false},
		{"middle, importance sampling in the graph", []bool{false, true, false}, true, true},
		{"last", []bool{false, false, true}, false, false},
		{"all", []bool{true, true, true}, false, false},
	} {
		if !all && c.name != "last" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			before, want := step(c.zero, true, c.is)
			_, got := step(c.zero, false, c.is)
			skipped := 0
			for _, z := range c.zero {
				if z {
					skipped++
				}
			}
			if got.rows != want.rows || got.rows < micro || got.metrics["micro_batches/skipped_ratio"] != float64(skipped) || want.metrics["micro_batches/skipped_ratio"] != 0 {
				t.Errorf("%d metrics rows, %v of them left out; want %d rows, %d left out (and none when every micro-batch runs: %v)",
					got.rows, got.metrics["micro_batches/skipped_ratio"], want.rows, skipped, want.metrics["micro_batches/skipped_ratio"])
			}
			for k, v := range want.metrics {
				// The importance-sampling metrics cover the micro-batches that ran.
				if k != "micro_batches/skipped_ratio" && !strings.HasPrefix(k, "sampling/") && got.metrics[k] != v {
					t.Errorf("%s summed over the rows: %v, every micro-batch run: %v", k, got.metrics[k], v)
				}
			}
			if got.loss != want.loss {
				t.Errorf("loss %v, every micro-batch run: %v", got.loss, want.loss)
			}
			// The gradient norm: the same accumulated float32 gradients reduced by another executable, at most
			// n roundings of a sum of n squares apart (n: the elements the norm covers).
			normBound := 0.0
			if !c.exact {
				normBound = float64(want.elems) * float64(eps) * want.norm
			}
			if math.Abs(got.norm-want.norm) > normBound || (want.norm == 0) != c.zero[0] {
				t.Errorf("gradient norm %v, every micro-batch run: %v (bound %.3g)", got.norm, want.norm, normBound)
			}
			moved := false
			for i, name := range names {
				for j, w := range want.weights[i] {
					g := got.weights[i][j]
					// One AdamW step's few float32 operations on p and on a step of at most lr.
					bound := float32(0)
					if !c.exact {
						bound = 8 * eps * (float32(math.Abs(float64(before[i][j]))) + lr)
					}
					if float32(math.Abs(float64(g-w))) > bound {
						t.Fatalf("%s[%d] = %v after the step, every micro-batch run: %v (bound %.3g)", name, j, g, w, bound)
					}
					moved = moved || w != before[i][j]
				}
			}
			if !moved && !c.zero[0] {
				t.Error("no weight moved in the step")
			}
		})
	}
}

// The generation's old log-probs and importance-sampling correction leave out the micro-batches the optimizer
// steps will (zeroAdvantage): batchLogProbsBut gives their log-probs as 0 and the others' as batchLogProbs does;
// generation.importanceSampling gives their ratio 1 and the others' ratios and the metrics as
// Config.ImportanceSampling over the kept sequences alone, in a token and a sequence mode.
func TestOldLogProbsLeaveOutSkipped(t *testing.T) {
	const bs, micro, length = 2, 3, 24
	m, err := model.New(benchlessBackend(t), model.TinyConfig(300, 1, 2), 5)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumGenerations = bs, micro, bs*micro
	cfg.NumIterations, cfg.LossType, cfg.MaxCompletionLength = 2, LossDAPO, length
	tr := &Trainer{Config: &cfg, Model: m}
	if err := tr.compile(); err != nil {
		t.Fatal(err)
	}
	gen := &generation{length: length}
	for i := range bs * micro {
		tj := &chat.Trajectory{}
		for j := range length {
			tj.Tokens = append(tj.Tokens, (i*131+j*17)%300)
			tj.Mask = append(tj.Mask, uint8(min(1, j/8)))
			tj.OldLogProbs = append(tj.OldLogProbs, -5.7+0.05*float32((i+j)%5))
		}
		gen.trajs = append(gen.trajs, tj)
		gen.advantages = append(gen.advantages, float64(i%2))
	}
	gen.advantages[2], gen.advantages[3] = 0, 0 // micro-batch 1
	skip := func(mb int) bool { return tr.zeroAdvantage(gen, mb) }
	if !skip(1) || skip(0) || skip(2) {
		t.Fatalf("zeroAdvantage of the micro-batches: %v %v %v, want false true false", skip(0), skip(1), skip(2))
	}
	all, err := tr.batchLogProbs(tr.logProbs, gen)
	if err != nil {
		t.Fatal(err)
	}
	if gen.old, err = tr.batchLogProbsBut(tr.logProbs, gen, skip); err != nil {
		t.Fatal(err)
	}
	for i, v := range gen.old {
		want := all[i]
		if i/length/bs == 1 {
			want = 0
		}
		if v != want {
			t.Fatalf("old log-prob %d (sequence %d): %v, want %v", i, i/length, v, want)
		}
	}
	sampling, mask := gen.samplingLogProbs(&cfg)
	kept := []int{0, 1, 4, 5}
	pick := func(x []float32) []float32 {
		var out []float32
		for _, b := range kept {
			out = append(out, x[b*length:(b+1)*length]...)
		}
		return out
	}
	for _, mode := range []string{ISTokenTruncate, ISSequenceMask} {
		cfg.VLLMImportanceSamplingMode = mode
		ratio, metrics := gen.importanceSampling(&cfg, sampling, mask, skip)
		wantRatio, wantMetrics := cfg.ImportanceSampling(pick(gen.old), pick(sampling), pick(mask), len(kept), length)
		for k, b := range kept {
			if !slices.Equal(ratio[b*length:(b+1)*length], wantRatio[k*length:(k+1)*length]) {
				t.Errorf("%s: sequence %d's ratios %v, want %v", mode, b, ratio[b*length:(b+1)*length], wantRatio[k*length:(k+1)*length])
			}
		}
		for _, v := range ratio[2*length : 4*length] {
			if v != 1 {
				t.Fatalf("%s: a left-out sequence's ratio %v, want 1", mode, v)
			}
		}
		if !maps.Equal(metrics, wantMetrics) {
			t.Errorf("%s: metrics %v, want %v over the kept sequences", mode, metrics, wantMetrics)
		}
	}
}
