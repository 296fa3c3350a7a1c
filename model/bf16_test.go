package model

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// bf16Golden is testdata/bf16_golden.json (gen_bf16_golden.py): transformers' logits and token log-probs with the
// golden checkpoints loaded in bfloat16.
type bf16Golden map[string]struct {
	Logits        []float64   `json:"logits"`
	TokenLogProbs [][]float64 `json:"token_logprobs"`
}

// bf16Diffs gathers, over a comparison, how far ours (bf16) and transformers' bfloat16 are from the float64
// reference, and how far ours is from our own float32.
type bf16Diffs struct{ from64, torchFrom64, from32, maxAbs float64 }

func (d *bf16Diffs) add(ours, ours32, torchBF16, ref64 float64) {
	d.from64 = math.Max(d.from64, math.Abs(ours-ref64))
	d.torchFrom64 = math.Max(d.torchFrom64, math.Abs(torchBF16-ref64))
	d.from32 = math.Max(d.from32, math.Abs(ours-ours32))
	d.maxAbs = math.Max(d.maxAbs, math.Abs(ref64))
}

// check bounds ours by transformers' own bfloat16 error on the same weights (twice it, plus one bfloat16 rounding
// of the largest value, eps16·max|v|, so that a reference that happened to land close does not make the bound
// too small: the two round at different places, transformers' activations everywhere and ours at the matmuls'
// inputs and outputs only), and asks that bfloat16 did run: ours is further from our float32 answer than a few
// float32 roundings of the largest value.
func (d *bf16Diffs) check(t *testing.T, what string) {
	t.Helper()
	const eps16 = 1.0 / 256 // bfloat16's unit roundoff: 8 significant bits
	bound := 2*d.torchFrom64 + eps16*d.maxAbs
	t.Logf("%s: max |value| %.3g; from float64: ours in bf16 %.3g, transformers' bf16 %.3g (bound %.3g); from our float32 %.3g",
		what, d.maxAbs, d.from64, d.torchFrom64, bound, d.from32)
	if !(d.from64 <= bound) {
		t.Errorf("%s in bf16 are %g from float64, more than twice transformers' own bf16 error (%g) plus a bfloat16 rounding of the largest (%g)",
			what, d.from64, d.torchFrom64, eps16*d.maxAbs)
	}
	if d.from32 <= 16*eps32*d.maxAbs {
		t.Errorf("%s in bf16 are within %g of float32's: bfloat16 did not run", what, d.from32)
	}
}

// TestBF16GoldenLogits: with bf16 on XLA the golden checkpoints' logits and token log-probs (a full, a left-padded
// and a right-padded row) are no further from transformers' float64 answer than transformers' own bfloat16 answer
// allows (bf16Diffs.check), for float32 weights (untied, rounded to bfloat16 at SetBF16) and bfloat16 ones (tied);
// the weights are stored in bfloat16, rounded to nearest even as torch rounds them, and read back by Tensor.
func TestBF16GoldenLogits(t *testing.T) {
	g := readGolden(t)
	data, err := os.ReadFile(filepath.Join("testdata", "bf16_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var gb bf16Golden
	if err := json.Unmarshal(data, &gb); err != nil {
		t.Fatal(err)
	}
	backend := engineBackend(t, EngineXLA)
	tokens := tensors.FromValue(g.Tokens)
	mask := tensors.FromValue(g.AttentionMask)
	for _, name := range []string{"untied", "tied"} {
		t.Run(name, func(t *testing.T) {
			m32, err := Load(backend, filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Load(backend, filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Freeze(); err != nil { // what a model that only computes log-probs has
				t.Fatal(err)
			}
			if err := m.SetBF16(true); err != nil {
				t.Fatal(err)
			}
			if !m.BF16() {
				t.Fatal("BF16() false after SetBF16(true)")
			}
			for _, n := range m.Config.TensorNames() {
				scope, vn := scopeOf(n)
				if dt := m.Ctx.GetVariableByScopeAndName(scope, vn).Shape().DType; dt != dtypes.BFloat16 {
					t.Fatalf("%s stored as %s, want bfloat16", n, dt)
				}
				x, _, err := m32.Tensor(n)
				if err != nil {
					t.Fatal(err)
				}
				y, _, err := m.Tensor(n)
				if err != nil {
					t.Fatal(err)
				}
				for i := range x {
					if want := math.Float32frombits(uint32(bf16FromF32(x[i])) << 16); y[i] != want {
						t.Fatalf("%s[%d] = %v in bf16, want %v (%v rounded to nearest even)", n, i, y[i], want, x[i])
					}
				}
			}
			want, ref := g.Models[name], gb[name]
			logits32 := run(t, m32, m32.Logits, tokens, mask)
			logits := run(t, m, m.Logits, tokens, mask)
			if len(logits) != len(want.Logits64) || len(ref.Logits) != len(want.Logits64) {
				t.Fatalf("logits size %d, float64 %d, transformers' bf16 %d", len(logits), len(want.Logits64), len(ref.Logits))
			}
			B, T, V := want.LogitsShape[0], want.LogitsShape[1], want.LogitsShape[2]
			var d bf16Diffs
			for b := range B {
				for tt := range T {
					if g.AttentionMask[b][tt] == 0 {
						continue
					}
					for v := range V {
						i := (b*T+tt)*V + v
						d.add(float64(logits[i]), float64(logits32[i]), ref.Logits[i], want.Logits64[i])
					}
				}
			}
			d.check(t, name+" logits")
			lp32 := run(t, m32, m32.TokenLogProbs, tokens, mask)
			lp := run(t, m, m.TokenLogProbs, tokens, mask)
			var dlp bf16Diffs
			for b := range B {
				for tt := range T {
					dlp.add(float64(lp[b*T+tt]), float64(lp32[b*T+tt]), ref.TokenLogProbs[b][tt], want.TokenLogProbs64[b][tt])
				}
			}
			dlp.check(t, name+" token log-probs")
			// Off again: float32 storage, the values bfloat16 rounded kept.
			before, _, err := m.Tensor("model.layers.0.mlp.up_proj.weight")
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetBF16(false); err != nil {
				t.Fatal(err)
			}
			scope, vn := scopeOf("model.layers.0.mlp.up_proj.weight")
			after, _, err := m.Tensor("model.layers.0.mlp.up_proj.weight")
			if dt := m.Ctx.GetVariableByScopeAndName(scope, vn).Shape().DType; m.BF16() || dt != dtypes.Float32 || err != nil {
				t.Fatalf("SetBF16(false): bf16 %v, up_proj stored as %s (%v)", m.BF16(), dt, err)
			}
			for i := range before {
				if before[i] != after[i] {
					t.Fatalf("SetBF16(false) changed up_proj[%d]: %v -> %v", i, before[i], after[i])
				}
			}
		})
	}
}

// TestBF16RefusedOnSimpleGo: simplego cannot run bf16 (it truncates to bfloat16), and SetBF16 says so, naming the
// engine, without changing the model.
func TestBF16RefusedOnSimpleGo(t *testing.T) {
	b, err := newSimpleGo("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(b, filepath.Join("testdata", "tied"))
	if err != nil {
		t.Fatal(err)
	}
	err = m.SetBF16(true)
	if !errors.Is(err, ErrBF16SimpleGo) {
		t.Fatalf("SetBF16(true) on simplego: %v, want ErrBF16SimpleGo", err)
	}
	if m.BF16() {
		t.Error("BF16() true after a refused SetBF16")
	}
	scope, vn := scopeOf("model.embed_tokens.weight")
	if dt := m.Ctx.GetVariableByScopeAndName(scope, vn).Shape().DType; dt != dtypes.Float32 {
		t.Errorf("embedding stored as %s after a refused SetBF16", dt)
	}
}

// TestBF16DotAccumulation: XLA's bfloat16 DotGeneral, as dot runs it with bf16, accumulates in float32 and rounds
// once at its output. Inputs exactly representable in bfloat16 (so that rounding them costs nothing), of random
// signs, so that the products cancel: every output is within one bfloat16 rounding of the float32 sum, |s - r| ≤
// γ·Σ|x·w| with γ = K·2⁻²⁴/(1 - K·2⁻²⁴) (float32 accumulation of K terms), |out - s| ≤ 2⁻⁸·|s|. Accumulating in
// bfloat16 would miss that by about 2⁻⁸·Σ|x·w|, far more where the sum cancels.
func TestBF16DotAccumulation(t *testing.T) {
	backend := engineBackend(t, EngineXLA)
	const m, n, k = 16, 24, 1024
	rng := rand.New(rand.NewPCG(5, 6))
	round := func(v float64) float32 { return math.Float32frombits(uint32(bf16FromF32(float32(v))) << 16) }
	x, w := make([]float32, m*k), make([]float32, n*k)
	for i := range x {
		x[i] = round(rng.NormFloat64())
	}
	for i := range w {
		w[i] = round(rng.NormFloat64())
	}
	e, err := graph.NewExec(backend, func(a, b *graph.Node) *graph.Node {
		return dot(true, a, []int{1}, nil, b, []int{1}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Exec1(tensors.FromFlatDataAndDimensions(x, m, k), tensors.FromFlatDataAndDimensions(w, n, k))
	if err != nil {
		t.Fatal(err)
	}
	if out.DType() != dtypes.Float32 {
		t.Fatalf("dot returned %s, want float32", out.DType())
	}
	got := tensors.MustCopyFlatData[float32](out)
	gamma := k * 0x1p-24 / (1 - k*0x1p-24)
	worst, cancel := 0.0, 0.0
	for i := range m {
		for j := range n {
			var r, abs float64
			for l := range k {
				p := float64(x[i*k+l]) * float64(w[j*k+l])
				r += p
				abs += math.Abs(p)
			}
			acc := gamma * abs
			bound := 0x1p-8*(math.Abs(r)+acc) + acc
			d := math.Abs(float64(got[i*n+j]) - r)
			worst = math.Max(worst, d/bound)
			cancel = math.Max(cancel, abs/math.Max(math.Abs(r), 1e-30))
			if d > bound {
				t.Errorf("[%d, %d] = %v, float64 %v: off by %.3g, more than one bfloat16 rounding of a float32 sum (%.3g; Σ|x·w| %.3g)",
					i, j, got[i*n+j], r, d, bound, abs)
			}
		}
	}
	t.Logf("largest error / bound %.3f; the sums cancel up to Σ|x·w| / |sum| = %.0f", worst, cancel)
}

// BenchmarkBF16Matmul times XLA's DotGeneral at SmolLM2-135M's linear-layer shapes for 8 x 512 tokens (x [4096, K]
// times w [N, K] transposed: q and o 576 x 576, k and v 192 x 576, gate and up 1536 x 576, down 576 x 1536), in
// float32 and as dot runs them with bf16 (the float32 activation rounded to bfloat16 in the graph, the weight
// stored in bfloat16, the result widened back): the mean GFLOP/s of each over the shapes (best of 4 calls each), and
// bf16's over float32's.
func BenchmarkBF16Matmul(b *testing.B) {
	backend := engineBackend(b, EngineXLA)
	shapes := [][3]int{{4096, 576, 576}, {4096, 192, 576}, {4096, 1536, 576}, {4096, 576, 1536}}
	var f32, bf16 float64
	for range b.N {
		f32, bf16 = backendMatmulRate(b, backend, shapes, false), backendMatmulRate(b, backend, shapes, true)
	}
	b.ReportMetric(f32, "f32-GFLOP/s")
	b.ReportMetric(bf16, "bf16-GFLOP/s")
	b.ReportMetric(bf16/f32, "bf16/f32")
}
