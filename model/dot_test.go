package model

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestSoftmaxGradient: softmax's value and closed-form gradient equal GoMLX's Softmax and its op-by-op gradient,
// masked scores (maskedScore added) and a fully masked row included.
func TestSoftmaxGradient(t *testing.T) {
	backend := testBackend(t)
	dims := []int{2, 3, 7}
	data := make([]float32, 2*3*7)
	for j := range data {
		data[j] = float32(3 * math.Sin(float64(j)*0.61))
		if j%5 == 0 || j/7 == 4 { // masked keys, and row 4 masked entirely
			data[j] += maskedScore
		}
	}
	x := tensors.FromFlatDataAndDimensions(data, dims...)
	run := func(mine bool) [][]float32 {
		out, err := graph.NewExec(backend, func(x *graph.Node) []*graph.Node {
			var y *graph.Node
			if mine {
				y = softmax(x)
			} else {
				y = graph.Softmax(x, -1)
			}
			w := graph.Cos(graph.IotaFull(x.Graph(), shapes.Make(dtypes.Float32, dims...)))
			return []*graph.Node{y, graph.Gradient(graph.ReduceAllSum(graph.Mul(y, w)), x)[0]}
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := out.Exec(x)
		if err != nil {
			t.Fatal(err)
		}
		return [][]float32{tensors.MustCopyFlatData[float32](res[0]), tensors.MustCopyFlatData[float32](res[1])}
	}
	want, got := run(false), run(true)
	for k, name := range []string{"value", "gradient"} {
		for j := range want[k] {
			if d := math.Abs(float64(want[k][j] - got[k][j])); d > 1e-6 || math.IsNaN(float64(got[k][j])) {
				t.Fatalf("%s [%d]: got %v, want %v", name, j, got[k][j], want[k][j])
			}
		}
	}
	if got[1][0] != 0 && data[0] < maskedScore/2 {
		t.Errorf("masked score got gradient %v", got[1][0])
	}
}
