package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestAttendGradient: attend's value and closed-form gradients (w.r.t. the queries, the keys and the values),
// with the probabilities kept and recomputed in the backward pass, equal GoMLX's Softmax of the masked scores
// followed by the product, differentiated op by op, masked keys and a fully masked row included. The two sum the
// S keys in other orders and round exp differently: within dotTol(S·hd) of the largest value of each output.
func TestAttendGradient(t *testing.T) {
	for _, recompute := range []bool{false, true} {
		t.Run(fmt.Sprintf("recompute=%v", recompute), func(t *testing.T) { testAttendGradient(t, recompute) })
	}
}

func testAttendGradient(t *testing.T, recompute bool) {
	backend := testBackend(t)
	q, keys, bias, values := attendInputs()
	run := func(mine bool) [][]float32 {
		out, err := graph.NewExec(backend, func(q, k, bias, v *graph.Node) []*graph.Node {
			var y *graph.Node
			if mine {
				y = attend(q, k, bias, v, recompute)
			} else {
				y = graph.DotGeneral(graph.Softmax(graph.Add(scores(q, k), bias), -1), []int{4}, []int{0, 1}, v, []int{2}, []int{0, 1})
			}
			w := graph.Cos(graph.IotaFull(q.Graph(), shapes.Make(dtypes.Float32, y.Shape().Dimensions...)))
			grads := graph.Gradient(graph.ReduceAllSum(graph.Mul(y, w)), q, k, v)
			return []*graph.Node{y, grads[0], grads[1], grads[2]}
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := out.Exec(q, keys, bias, values)
		if err != nil {
			t.Fatal(err)
		}
		var flat [][]float32
		for _, r := range res {
			flat = append(flat, tensors.MustCopyFlatData[float32](r))
		}
		return flat
	}
	want, got := run(false), run(true)
	for k, name := range []string{"value", "queries gradient", "keys gradient", "values gradient"} {
		scale := 0.0
		for _, w := range want[k] {
			scale = max(scale, math.Abs(float64(w)))
		}
		bound := dotTol(7*5, scale)
		for j := range want[k] {
			if d := math.Abs(float64(want[k][j] - got[k][j])); d > bound || math.IsNaN(float64(got[k][j])) {
				t.Fatalf("%s [%d]: got %v, want %v", name, j, got[k][j], want[k][j])
			}
		}
	}
}

// attendInputs are attend's inputs for the tests: q [B, kvH, G, T, hd] = [2, 1, 3, 4, 5], keys and values
// [B, kvH, S, hd] = [2, 1, 7, 5], and a bias [B, 1, 1, T, S] that masks some keys and all of row 2's.
func attendInputs() (q, keys, bias, values *tensors.Tensor) {
	wave := func(n int, f func(float64) float64, step, amp float64) []float32 {
		out := make([]float32, n)
		for j := range out {
			out[j] = float32(amp * f(float64(j)*step))
		}
		return out
	}
	b := make([]float32, 2*4*7)
	for j := range b {
		if j%5 == 0 || j%28/7 == 2 {
			b[j] = maskedScore
		}
	}
	return tensors.FromFlatDataAndDimensions(wave(2*3*4*5, math.Sin, 0.61, 1.3), 2, 1, 3, 4, 5),
		tensors.FromFlatDataAndDimensions(wave(2*7*5, math.Sin, 0.29, 1.1), 2, 1, 7, 5),
		tensors.FromFlatDataAndDimensions(b, 2, 1, 1, 4, 7),
		tensors.FromFlatDataAndDimensions(wave(2*7*5, math.Cos, 0.37, 1), 2, 1, 7, 5)
}

// TestSwiGLUGradient: swiGLU's value and closed-form gradients equal silu(gate) * up differentiated by GoMLX op by
// op, over gates from -9 to 9: within a few roundings (8·eps32) of each value, scaled by the gate's magnitude
// (the exponential's argument).
func TestSwiGLUGradient(t *testing.T) {
	backend := testBackend(t)
	n := 3 * 41
	gate, up := make([]float32, n), make([]float32, n)
	for j := range gate {
		gate[j] = float32(-9 + 18*float64(j)/float64(n-1))
		up[j] = float32(2 * math.Sin(float64(j)*0.7))
	}
	run := func(mine bool) [][]float32 {
		out, err := graph.NewExec(backend, func(g, u *graph.Node) []*graph.Node {
			var y *graph.Node
			if mine {
				y = swiGLU(g, u, true)
			} else {
				y = graph.Mul(graph.Mul(g, graph.Sigmoid(g)), u)
			}
			w := graph.Cos(graph.IotaFull(g.Graph(), shapes.Make(dtypes.Float32, 3, 41)))
			grads := graph.Gradient(graph.ReduceAllSum(graph.Mul(y, w)), g, u)
			return []*graph.Node{y, grads[0], grads[1]}
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := out.Exec(tensors.FromFlatDataAndDimensions(gate, 3, 41), tensors.FromFlatDataAndDimensions(up, 3, 41))
		if err != nil {
			t.Fatal(err)
		}
		return [][]float32{tensors.MustCopyFlatData[float32](res[0]), tensors.MustCopyFlatData[float32](res[1]),
			tensors.MustCopyFlatData[float32](res[2])}
	}
	want, got := run(false), run(true)
	for k, name := range []string{"value", "gate gradient", "up gradient"} {
		for j := range want[k] {
			bound := 8 * eps32 * (1 + math.Abs(float64(want[k][j]))) * (1 + math.Abs(float64(gate[j%n])))
			if d := math.Abs(float64(want[k][j] - got[k][j])); d > bound || math.IsNaN(float64(got[k][j])) {
				t.Fatalf("%s [%d] (gate %v): got %v, want %v", name, j, gate[j%n], got[k][j], want[k][j])
			}
		}
	}
}
