package model

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestAttendGradient: attend's value and closed-form gradients (w.r.t. the scores and the values) equal GoMLX's
// Softmax followed by the product, differentiated op by op, masked scores (maskedScore added) and a fully masked
// row included. The two sum the S keys in other orders and round exp differently: within dotTol(S) of the
// largest value of each output.
func TestAttendGradient(t *testing.T) {
	backend := testBackend(t)
	dims := []int{2, 1, 3, 4, 7} // [B, kvH, G, T, S]
	vdims := []int{2, 1, 7, 5}   // [B, kvH, S, hd]
	data := make([]float32, 2*3*4*7)
	for j := range data {
		data[j] = float32(3 * math.Sin(float64(j)*0.61))
		if j%5 == 0 || j/7 == 4 { // masked keys, and row 4 masked entirely
			data[j] += maskedScore
		}
	}
	vals := make([]float32, 2*7*5)
	for j := range vals {
		vals[j] = float32(math.Cos(float64(j) * 0.37))
	}
	x, v := tensors.FromFlatDataAndDimensions(data, dims...), tensors.FromFlatDataAndDimensions(vals, vdims...)
	run := func(mine bool) [][]float32 {
		out, err := graph.NewExec(backend, func(x, v *graph.Node) []*graph.Node {
			var y *graph.Node
			if mine {
				y = attend(x, v)
			} else {
				y = graph.DotGeneral(graph.Softmax(x, -1), []int{4}, []int{0, 1}, v, []int{2}, []int{0, 1})
			}
			w := graph.Cos(graph.IotaFull(x.Graph(), shapes.Make(dtypes.Float32, y.Shape().Dimensions...)))
			grads := graph.Gradient(graph.ReduceAllSum(graph.Mul(y, w)), x, v)
			return []*graph.Node{y, grads[0], grads[1]}
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := out.Exec(x, v)
		if err != nil {
			t.Fatal(err)
		}
		return [][]float32{tensors.MustCopyFlatData[float32](res[0]), tensors.MustCopyFlatData[float32](res[1]),
			tensors.MustCopyFlatData[float32](res[2])}
	}
	want, got := run(false), run(true)
	for k, name := range []string{"value", "scores gradient", "values gradient"} {
		scale := 0.0
		for _, w := range want[k] {
			scale = max(scale, math.Abs(float64(w)))
		}
		bound := dotTol(dims[4], scale)
		for j := range want[k] {
			if d := math.Abs(float64(want[k][j] - got[k][j])); d > bound || math.IsNaN(float64(got[k][j])) {
				t.Fatalf("%s [%d]: got %v, want %v", name, j, got[k][j], want[k][j])
			}
		}
	}
	if got[1][0] != 0 && data[0] < maskedScore/2 {
		t.Errorf("masked score got gradient %v", got[1][0])
	}
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
				y = swiGLU(g, u)
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
