package model

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
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
			m.SetGradientCheckpointing(true)
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
			setRecompute(m, false)
			wantLP, wantGrads := logProbsAndGradients(t, m, tokens, mask, tc.temp, 5, 0)
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

// TestRecomputeExactDropout is TestRecomputeExact for a training graph, where LoRA's dropout acts (lora_dropout 0.2
// on every linear layer): the masks redrawn in the backward pass from the same random state give the gradients of
// the masks drawn once, bit for bit, and the state the graph leaves behind is the same.
func TestRecomputeExactDropout(t *testing.T) {
	backend := testBackend(t)
	cfg := TinyConfig(300, 1, 2)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 32, 48, 2
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 4, 2
	cfg.InitializerRange = 0.3
	m, err := New(backend, cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
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
	tokens, mask, err := PadBatch([][]int{{5, 17, 250, 3, 99, 140, 7, 7, 201}, {11, 12, 13, 14}, {280, 1, 2, 3, 4, 5, 6}}, 12, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	run := func() (lp []float32, grads map[string][]float32, state []uint64) {
		var names []string
		e, err := context.NewExec(m.Backend, m.Ctx, func(ctx *context.Context, tokens, mask *graph.Node) []*graph.Node {
			g := tokens.Graph()
			ctx.SetTraining(g, true)
			out := m.TokenLogProbsAt(ctx, tokens, mask, 0.7)
			loss := graph.ReduceAllSum(graph.Mul(out, graph.Cos(graph.IotaFull(g, shapes.Make(dtypes.Float32, out.Shape().Dimensions...)))))
			var vars []*graph.Node
			names = names[:0]
			for v := range ctx.IterVariables() {
				if v.Trainable {
					vars = append(vars, v.ValueGraph(g))
					names = append(names, v.ScopeAndName())
				}
			}
			return append([]*graph.Node{out}, graph.Gradient(loss, vars...)...)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SeedDropout(3, 1); err != nil {
			t.Fatal(err)
		}
		res, err := e.Exec(tokens, mask)
		if err != nil {
			t.Fatal(err)
		}
		grads = map[string][]float32{}
		for i, name := range names {
			grads[name] = tensors.MustCopyFlatData[float32](res[1+i])
		}
		st := m.Ctx.GetVariableByScopeAndName(context.RootScope, context.RNGStateVariableName)
		v, err := st.Value()
		if err != nil {
			t.Fatal(err)
		}
		return tensors.MustCopyFlatData[float32](res[0]), grads, tensors.MustCopyFlatData[uint64](v)
	}
	gotLP, gotGrads, gotState := run()
	setRecompute(m, false)
	wantLP, wantGrads, wantState := run()
	setRecompute(m, true)
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
	nonZero := 0
	for name, want := range wantGrads {
		exact("gradient of "+name, gotGrads[name], want)
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
