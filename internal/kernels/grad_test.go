package kernels

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestDotGradient: the registered DotGeneral gradient equals GoMLX's own for the axis layouts the model uses
// (linear [B,T,in] x [out,in], attention with batch axes, cache-major keys with batch axes not in front, two
// contracting axes in another order).
func TestDotGradient(t *testing.T) {
	backend := newBackend(t)
	if err := InstallDotGradient(backend); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		lhs, rhs       []int
		lc, lb, rc, rb []int
	}{
		{[]int{2, 3, 4}, []int{5, 4}, []int{2}, nil, []int{1}, nil},
		{[]int{2, 3, 2, 3, 4}, []int{2, 3, 5, 4}, []int{4}, []int{0, 1}, []int{3}, []int{0, 1}},
		{[]int{2, 3, 2, 3, 5}, []int{2, 3, 5, 4}, []int{4}, []int{0, 1}, []int{2}, []int{0, 1}},
		{[]int{2, 3, 2, 3, 4}, []int{5, 2, 3, 4}, []int{4}, []int{0, 1}, []int{3}, []int{1, 2}},
		{[]int{4, 3, 6}, []int{6, 5, 4}, []int{0, 2}, nil, []int{2, 0}, nil},
	}
	for i, c := range cases {
		fill := func(dims []int, seed float64) *tensors.Tensor {
			n := 1
			for _, d := range dims {
				n *= d
			}
			data := make([]float32, n)
			for j := range data {
				data[j] = float32(math.Sin(float64(j)*0.37 + seed))
			}
			return tensors.FromFlatDataAndDimensions(data, dims...)
		}
		lhs, rhs := fill(c.lhs, 0.1), fill(c.rhs, 0.7)
		// The bound: each output is a sum of products, computed in two orders by the two gradients; each order is
		// within dotBound of the exact sum, whose terms' magnitudes add up to the same computation on |inputs|
		// (GoMLX's gradient with every input and weight made positive; Abs passes its sign back, hence the
		// magnitude). terms: the most any output sums, at most y's size times the contracted size.
		grads := func(mine, abs bool) [][]float32 {
			vjp := graph.VJP(dotGeneralVJP)
			if !mine {
				vjp = gomlxDotGradient
			}
			out, err := graph.NewExec(backend, func(l, r *graph.Node) []*graph.Node {
				// The registry is read while the gradient graph is built.
				graph.VJPRegistration[graph.NodeTypeDotGeneral] = vjp
				defer func() { graph.VJPRegistration[graph.NodeTypeDotGeneral] = dotGeneralVJP }()
				if abs {
					l, r = graph.Abs(l), graph.Abs(r)
				}
				y := graph.DotGeneral(l, c.lc, c.lb, r, c.rc, c.rb)
				w := graph.Sin(graph.IotaFull(l.Graph(), shapes.Make(dtypes.Float32, y.Shape().Dimensions...)))
				if abs {
					w = graph.Abs(w)
				}
				loss := graph.ReduceAllSum(graph.Mul(y, w))
				return append([]*graph.Node{y}, graph.Gradient(loss, l, r)...)
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := out.Exec(lhs, rhs)
			if err != nil {
				t.Fatal(err)
			}
			var flat [][]float32
			for _, r := range res {
				flat = append(flat, tensors.MustCopyFlatData[float32](r))
			}
			return flat
		}
		want, got, absSum := grads(false, false), grads(true, false), grads(false, true)
		terms := len(want[0])
		for _, a := range c.lc {
			terms *= c.lhs[a]
		}
		for k := range want {
			for j := range want[k] {
				if math.Abs(float64(want[k][j]-got[k][j])) > 2*dotBound(math.Abs(float64(absSum[k][j])), terms) {
					t.Fatalf("case %d output %d [%d]: got %v want %v", i, k, j, got[k][j], want[k][j])
				}
			}
		}
	}
}
