package model

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// testBackend opens the engine the package's tests run on: simplego (or $GOMLX_BACKEND's, see NewBackend), or
// the one TestOnEngines runs them on (testEngine).
func testBackend(t testing.TB) backends.Backend {
	t.Helper()
	if testEngine != "" {
		return engineBackend(t, testEngine)
	}
	b, err := NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type goldenFile struct {
	Tokens        [][]int32 `json:"tokens"`
	AttentionMask [][]int32 `json:"attention_mask"`
	Models        map[string]struct {
		Logits          []float64   `json:"logits"`
		LogitsShape     []int       `json:"logits_shape"`
		TokenLogProbs   [][]float64 `json:"token_logprobs"`
		Logits64        []float64   `json:"logits64"`
		TokenLogProbs64 [][]float64 `json:"token_logprobs64"`
	} `json:"models"`
}

func readGolden(t *testing.T) *goldenFile {
	t.Helper()
	data, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// run executes a graph function of the model's context on tokens and mask.
func run(t *testing.T, m *Model, fn func(ctx *context.Context, tokens, mask *graph.Node) *graph.Node, tokens, mask *tensors.Tensor) []float32 {
	t.Helper()
	e, err := context.NewExec(m.Backend, m.Ctx, fn)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Exec(tokens, mask)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float32](out[0])
}

// TestGoldenLogits compares logits and token log-probs with transformers' Qwen2ForCausalLM
// (testdata/gen_golden.py) on a batch with a full row, a left-padded row and a right-padded row, for an untied
// sharded float32 checkpoint and a tied bfloat16 one, both written by save_pretrained: ours must be no further
// from transformers' float64 answer than three times its own float32 one (logitDiffs).
func TestGoldenLogits(t *testing.T) {
	g := readGolden(t)
	backend := testBackend(t)
	tokens := tensors.FromValue(g.Tokens)
	mask := tensors.FromValue(g.AttentionMask)
	for _, name := range []string{"untied", "tied"} {
		t.Run(name, func(t *testing.T) {
			m, err := Load(backend, "testdata/"+name)
			if err != nil {
				t.Fatal(err)
			}
			want := g.Models[name]
			logits := run(t, m, m.Logits, tokens, mask)
			if len(logits) != len(want.Logits) || len(want.Logits64) != len(want.Logits) {
				t.Fatalf("logits size %d, want %d (float64: %d)", len(logits), len(want.Logits), len(want.Logits64))
			}
			B, T, V := want.LogitsShape[0], want.LogitsShape[1], want.LogitsShape[2]
			var d logitDiffs
			for b := range B {
				for tt := range T {
					if g.AttentionMask[b][tt] == 0 {
						continue
					}
					for v := range V {
						i := (b*T+tt)*V + v
						d.add(float64(logits[i]), want.Logits[i], want.Logits64[i])
					}
				}
			}
			d.check(t, name+" logits")
			lp := run(t, m, m.TokenLogProbs, tokens, mask)
			var dlp logitDiffs
			for b := range B {
				for tt := range T {
					dlp.add(float64(lp[b*T+tt]), want.TokenLogProbs[b][tt], want.TokenLogProbs64[b][tt])
				}
			}
			dlp.check(t, name+" token log-probs")
		})
	}
}
