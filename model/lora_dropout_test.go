package model

import (
	stdctx "context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// TestLoRADropoutMasksInput: in a training graph the adapter's branch reads dropout(x): with A = B = identity and
// scaling 1, loraDelta of q_proj and o_proj returns x with each element zeroed at rate ~p and the kept ones scaled
// by 1/(1-p), each module with its own mask and each call with a new one; outside training it returns x itself.
func TestLoRADropoutMasksInput(t *testing.T) {
	const p = 0.25
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			m := importTiny(t, arch)
			d := m.Config.HiddenSize
			cfg := LoRAConfig{R: d, Alpha: float64(d), Dropout: p, TargetModules: []string{"q_proj", "o_proj"}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			eye := make([]float32, d*d)
			for i := range d {
				eye[i*d+i] = 1
			}
			for _, lp := range m.loraParams(&cfg) {
				if lp.out != d || lp.in != d {
					t.Fatalf("%s is [%d, %d], the test needs [%d, %d]", lp.module, lp.out, lp.in, d, d)
				}
				m.setLoRA(lp, cfg, eye, eye)
			}
			m.attachLoRA(cfg)
			if err := m.SeedDropout(1, 0); err != nil {
				t.Fatal(err)
			}
			const b, n = 4, 64
			xs := make([]float32, b*n*d)
			for i := range xs {
				xs[i] = float32(i%13+1) * 0.25
			}
			deltas := func(training bool) [][]float32 {
				e, err := context.NewExec(m.Backend, m.Ctx, func(ctx *context.Context, x *graph.Node) []*graph.Node {
					ctx.SetTraining(x.Graph(), training)
					attn := ctx.In("model").In("layers").In("0").In("self_attn")
					return []*graph.Node{loraDelta(attn.In("q_proj"), x), loraDelta(attn.In("o_proj"), x)}
				})
				if err != nil {
					t.Fatal(err)
				}
				out, err := e.Exec(tensors.FromFlatDataAndDimensions(xs, b, n, d))
				if err != nil {
					t.Fatal(err)
				}
				return [][]float32{tensors.MustCopyFlatData[float32](out[0]), tensors.MustCopyFlatData[float32](out[1])}
			}
			if got := deltas(false); !slices.Equal(got[0], xs) || !slices.Equal(got[1], xs) {
				t.Fatal("outside training the branch does not read x unchanged")
			}
			first := deltas(true)
			for k, got := range first {
				zeros := 0
				for i, v := range got {
					switch want := float64(xs[i]) / (1 - p); {
					case v == 0:
						zeros++
					case math.Abs(float64(v)-want) > 2*eps32*math.Abs(want): // x times 1/(1-p): two roundings
						t.Fatalf("module %d element %d: %g, want 0 or x/(1-p) = %g", k, i, v, want)
					}
				}
				rate := float64(zeros) / float64(len(got))
				t.Logf("module %d: %d of %d elements dropped (rate %.4f, p %g)", k, zeros, len(got), rate, p)
				if math.Abs(rate-p) > 0.02 {
					t.Errorf("module %d: drop rate %.4f, want %g +- 0.02", k, rate, p)
				}
			}
			if slices.Equal(first[0], first[1]) {
				t.Error("q_proj and o_proj drew the same mask")
			}
			if slices.Equal(deltas(true)[0], first[0]) {
				t.Error("a second call drew the same mask")
			}
		})
	}
}

// TestLoRADropoutForward: on the whole model (both architectures, an adapter on all seven projections),
// lora_dropout changes the token log-probs of a training graph only: the masks are the same for the same seed and
// step and differ for another step; the evaluation graph and greedy and sampled generation give exactly what the
// same adapter with lora_dropout 0 gives, and with lora_dropout 0 (or after Merge) a training graph computes
// exactly the evaluation graph's numbers, as before dropout existed. A loaded adapter keeps its lora_dropout.
func TestLoRADropoutForward(t *testing.T) {
	toks, mask := tinyBatch(t)
	// logProbs runs fn on the batch (fresh tensors: each model has its own backend).
	logProbs := func(m *Model, fn func(ctx *context.Context, tokens, mask *graph.Node) *graph.Node) []float32 {
		return run(t, m, fn, tensors.FromValue(toks), tensors.FromValue(mask))
	}
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			m := importTiny(t, arch)
			if err := m.AddLoRA(LoRAConfig{R: 4, Alpha: 8, Dropout: 0.1, TargetModules: []string{"all-linear"}}, 1); err != nil {
				t.Fatal(err)
			}
			for v := range m.Ctx.IterVariables() {
				if strings.Contains(v.Scope(), "/lora_B") {
					vals := make([]float32, v.Shape().Size())
					for i := range vals {
						vals[i] = float32(i%7-3) * 0.05
					}
					if err := v.SetValue(tensors.FromFlatDataAndDimensions(vals, v.Shape().Dimensions...)); err != nil {
						t.Fatal(err)
					}
				}
			}
			trainingLogProbs := func(m *Model) func(ctx *context.Context, tokens, mask *graph.Node) *graph.Node {
				return func(ctx *context.Context, tokens, mask *graph.Node) *graph.Node {
					ctx.SetTraining(tokens.Graph(), true)
					return m.TokenLogProbs(ctx, tokens, mask)
				}
			}
			training := func(m *Model, step int) []float32 {
				if err := m.SeedDropout(9, step); err != nil {
					t.Fatal(err)
				}
				return logProbs(m, trainingLogProbs(m))
			}
			eval := logProbs(m, m.TokenLogProbs)
			a, again, next := training(m, 0), training(m, 0), training(m, 1)
			if !slices.Equal(a, again) {
				t.Error("the same seed and step drew other masks")
			}
			if slices.Equal(a, next) {
				t.Error("steps 0 and 1 drew the same masks")
			}
			moved := 0.0
			for i := range a {
				if math.IsNaN(float64(a[i])) || math.IsInf(float64(a[i]), 0) {
					t.Fatalf("training log-prob %d is %g", i, a[i])
				}
				moved = math.Max(moved, math.Abs(float64(a[i]-eval[i])))
			}
			t.Logf("dropout 0.1 moves the training graph's log-probs by up to %.3g", moved)
			if moved == 0 {
				t.Error("dropout changed nothing in the training graph")
			}
			if !slices.Equal(logProbs(m, m.TokenLogProbs), eval) {
				t.Error("the evaluation graph changed after training graphs ran")
			}

			// The same adapter with lora_dropout 0, and loaded back with 0.1.
			dir, dir0 := t.TempDir(), t.TempDir()
			if err := m.SaveAdapter(dir); err != nil {
				t.Fatal(err)
			}
			js, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(js), `"lora_dropout": 0.1,`) {
				t.Errorf("adapter_config.json does not record lora_dropout 0.1:\n%s", js)
			}
			st, _ := os.ReadFile(filepath.Join(dir, "adapter_model.safetensors"))
			os.WriteFile(filepath.Join(dir0, "adapter_config.json"), []byte(strings.Replace(string(js), `"lora_dropout": 0.1,`, `"lora_dropout": 0,`, 1)), 0o644)
			os.WriteFile(filepath.Join(dir0, "adapter_model.safetensors"), st, 0o644)
			m0, m1 := importTiny(t, arch), importTiny(t, arch)
			if err := m0.LoadAdapter(dir0); err != nil {
				t.Fatal(err)
			}
			if err := m1.LoadAdapter(dir); err != nil {
				t.Fatal(err)
			}
			if m0.LoRA().Dropout != 0 || m1.LoRA().Dropout != 0.1 {
				t.Errorf("loaded lora_dropout %g and %g, want 0 and 0.1", m0.LoRA().Dropout, m1.LoRA().Dropout)
			}
			if !slices.Equal(logProbs(m0, m0.TokenLogProbs), eval) {
				t.Error("the evaluation graph differs between lora_dropout 0.1 and 0")
			}
			if !slices.Equal(training(m0, 0), eval) {
				t.Error("with lora_dropout 0 the training graph differs from the evaluation graph")
			}
			if !slices.Equal(training(m1, 0), a) {
				t.Error("the loaded adapter drew other masks for the same seed and step")
			}
			prompts := [][]int{{5, 9, 13, 40}, {7, 7, 8}}
			for _, temp := range []float64{0, 1} {
				opts := SampleOptions{Temperature: temp, MaxNewTokens: 6}
				got, err := m.Generate(stdctx.Background(), prompts, opts, 3)
				if err != nil {
					t.Fatal(err)
				}
				want, err := m0.Generate(stdctx.Background(), prompts, opts, 3)
				if err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if !slices.Equal(got[i].Tokens, want[i].Tokens) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) {
						t.Errorf("temperature %g, prompt %d: lora_dropout 0.1 generates %v %v, 0 generates %v %v",
							temp, i, got[i].Tokens, got[i].LogProbs, want[i].Tokens, want[i].LogProbs)
					}
				}
			}
			if err := m.Merge(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(training(m, 0), logProbs(m, m.TokenLogProbs)) {
				t.Error("after Merge the training graph still drops")
			}
		})
	}
}
