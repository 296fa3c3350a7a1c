package model

import (
	"fmt"
	"math"
	"testing"
)

// TestRecomputeExact: the gradients computed with the backward pass's own recomputations (inBackward: σ(gate) and
// g ⊙ σ(gate) of SwiGLU, and the attention probabilities with Model.RecomputeAttention) equal, bit for bit, those
// computed from the forward pass's tensors, and so do the log-probs: for a tied model with LoRA on every linear
// layer and trainable token rows and an untied one, chunked log-probs (5 rows a chunk), padding on the left and
// on the right. TestOnEngines runs it on XLA, which merges identical expressions and fuses differently.
func TestRecomputeExact(t *testing.T) {
	backend := testBackend(t)
	seqs := [][]int{{5, 17, 250, 3, 99, 140, 7, 7, 201}, {11, 12, 13, 14}, {280, 1, 2, 3, 4, 5, 6}}
	for _, tc := range []struct {
		tied, left bool
		temp       float64
	}{{true, true, 0.7}, {false, false, 1}} {
		t.Run(fmt.Sprintf("tied=%v,left=%v", tc.tied, tc.left), func(t *testing.T) {
			cfg := TinyConfig(300, 1, 2)
			cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 32, 48, 2
			cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 4, 2
			cfg.TieWordEmbeddings = tc.tied
			cfg.InitializerRange = 0.3
			m, err := New(backend, cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			m.RecomputeAttention = true
			if tc.tied {
				if err := m.AddLoRA(LoRAConfig{R: 4, Alpha: 8, TargetModules: []string{"all-linear"}, TrainableTokenIndices: []int{3, 250}}, 3); err != nil {
					t.Fatal(err)
				}
			}
			tokens, mask, err := PadBatch(seqs, 12, 0, tc.left)
			if err != nil {
				t.Fatal(err)
			}
			gotLP, gotGrads := logProbsAndGradients(t, m, tokens, mask, tc.temp, 5, 0)
			recomputeInBackward = false
			defer func() { recomputeInBackward = true }()
			wantLP, wantGrads := logProbsAndGradients(t, m, tokens, mask, tc.temp, 5, 0)
			recomputeInBackward = true
			if len(wantGrads) == 0 || len(gotGrads) != len(wantGrads) {
				t.Fatalf("%d gradients, want %d (> 0)", len(gotGrads), len(wantGrads))
			}
			exact := func(name string, got, want []float32) {
				for j := range want {
					if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
						t.Fatalf("%s [%d]: %v recomputed in the backward pass, %v from the forward pass", name, j, got[j], want[j])
					}
				}
			}
			exact("log-probs", gotLP, wantLP)
			for name, want := range wantGrads {
				exact("gradient of "+name, gotGrads[name], want)
			}
		})
	}
}
