package model

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// TestRecomputeExact: the gradients computed with the backward pass's own recomputations (inBackward: σ(gate) and
// g ⊙ σ(gate) of SwiGLU, and with gradient checkpointing the attention probabilities and the LoRA branches' dropout
// masks and dropped-out inputs) equal, bit for bit, those computed from the forward pass's tensors, and so do the
// log-probs: for a tied model with LoRA on every linear layer and trainable token rows and an untied one, chunked
// log-probs (5 rows a chunk), padding on the left and on the right, and a training graph with lora_dropout 0.2
// drawing its masks from a seeded random state. TestOnEngines runs it on XLA, which merges identical expressions
// and fuses differently.
func TestRecomputeExact(t *testing.T) {
	backend := testBackend(t)
	for _, tc := range []struct {
		tied, left bool
		temp       float64
	}{{true, true, 0.7}, {false, false, 1}} {
		t.Run(fmt.Sprintf("tied=%v,left=%v", tc.tied, tc.left), func(t *testing.T) {
			m := gradModel(t, backend, tc.tied)
			m.SetGradientCheckpointing(true)
			if tc.tied {
				if err := m.AddLoRA(LoRAConfig{R: 4, Alpha: 8, TargetModules: []string{"all-linear"}, TrainableTokenIndices: []int{3, 250}}, 3); err != nil {
					t.Fatal(err)
				}
			}
			tokens, mask := gradBatch(t, tc.left)
			gotLP, gotGrads := logProbsAndGradients(t, m, tokens, mask, tc.temp, 5, 0)
			setRecompute(m, false)
			wantLP, wantGrads := logProbsAndGradients(t, m, tokens, mask, tc.temp, 5, 0)
			sameBits(t, gotLP, wantLP, gotGrads, wantGrads)
		})
	}
}

// TestRecomputeExactDropout is TestRecomputeExact for a training graph, where LoRA's dropout acts (lora_dropout 0.2
// on every linear layer): the masks redrawn in the backward pass from the same random state give the gradients of
// the masks drawn once, bit for bit, and the state the graph leaves behind is the same.
func TestRecomputeExactDropout(t *testing.T) {
	backend := testBackend(t)
	m := gradModel(t, backend, true)
	if err := m.AddLoRA(LoRAConfig{R: 4, Alpha: 8, Dropout: 0.2, TargetModules: []string{"all-linear"}}, 3); err != nil {
		t.Fatal(err)
	}
	// B starts at zero, which would leave A without a gradient: give the branches values.
	for v := range m.Ctx.IterVariables() {
		if v.Trainable && strings.HasSuffix(v.Scope(), "lora_B") {
			val, err := v.Value()
			if err != nil {
				t.Fatal(err)
			}
			shape := val.Shape().Dimensions
			data := make([]float32, val.Size())
			for j := range data {
				data[j] = float32(0.3 * math.Sin(float64(j)*0.77))
			}
			if err := v.SetValue(tensors.FromFlatDataAndDimensions(data, shape...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.SetGradientCheckpointing(true)
	tokens, mask := gradBatch(t, true)
	run := func() (lp []float32, grads map[string][]float32, state []uint64) {
		if err := m.SeedDropout(3, 1); err != nil {
			t.Fatal(err)
		}
		lp, grads = valueAndGradients(t, m, tokens, mask, func(ctx *context.Context, tokens, mask *graph.Node) *graph.Node {
			ctx.SetTraining(tokens.Graph(), true)
			return m.TokenLogProbsAt(ctx, tokens, mask, 0.7)
		})
		st := m.Ctx.GetVariableByScopeAndName(context.RootScope, context.RNGStateVariableName)
		v, err := st.Value()
		if err != nil {
			t.Fatal(err)
		}
		return lp, grads, tensors.MustCopyFlatData[uint64](v)
	}
	gotLP, gotGrads, gotState := run()
	setRecompute(m, false)
	wantLP, wantGrads, wantState := run()
	setRecompute(m, true)
	sameBits(t, gotLP, wantLP, gotGrads, wantGrads)
	nonZero := 0
	for _, want := range wantGrads {
		for _, w := range want {
			if w != 0 {
				nonZero++
				break
			}
		}
	}
	if nonZero < len(wantGrads)/2 {
		t.Errorf("only %d of %d gradients are non-zero", nonZero, len(wantGrads))
	}
	// simplego's generator is seeded by the state's first two words and writes only those back, into the input's
	// buffer when the graph holds it last (the third word then stays) or into a fresh one: compare what it reads.
	if backend.String() == "go" {
		gotState, wantState = gotState[:2], wantState[:2]
	}
	if fmt.Sprint(gotState) != fmt.Sprint(wantState) {
		t.Errorf("random state after the step %v, want %v", gotState, wantState)
	}
	// The masks act: the same graph without dropout gives other log-probs.
	plain, _ := logProbsAndGradients(t, m, tokens, mask, 0.7, 0, 0)
	same := true
	for j := range plain {
		same = same && plain[j] == gotLP[j]
	}
	if same {
		t.Error("the training graph's log-probs equal the evaluation graph's: no dropout acted")
	}
}

// setRecompute sets recomputeParam on m: the graphs built afterwards compute again in the backward pass what the
// custom gradients need (on), or read it from the forward pass (off).
func setRecompute(m *Model, on bool) {
	m.Ctx.InAbsPath(context.RootScope).SetParam(recomputeParam, on)
}

// sameBits fails unless the log-probs and the gradients recomputed in the backward pass (got) are those computed
// from the forward pass's tensors (want), bit for bit, with gradients for the same variables (some).
func sameBits(t *testing.T, gotLP, wantLP []float32, gotGrads, wantGrads map[string][]float32) {
	t.Helper()
	if len(wantGrads) == 0 || len(gotGrads) != len(wantGrads) {
		t.Fatalf("%d gradients, want %d (> 0)", len(gotGrads), len(wantGrads))
	}
	exact := func(name string, got, want []float32) {
		if len(got) != len(want) {
			t.Fatalf("%s: %d values recomputed in the backward pass, %d from the forward pass", name, len(got), len(want))
		}
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
}
