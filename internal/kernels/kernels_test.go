package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

func size(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

// newBackend installs the kernels and returns a sequential simplego backend, finalized when the test ends.
func newBackend(t testing.TB) *simplego.Backend {
	t.Helper()
	if err := Install(); err != nil {
		t.Fatal(err)
	}
	backend, err := simplego.New("ops_sequential")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(backend.Finalize)
	return backend.(*simplego.Backend)
}

// opCase is a graph over float32 inputs of the given shapes; tol is the allowed relative difference from
// simplego's own executors (0: bit-identical).
type opCase struct {
	name   string
	inputs [][]int
	fn     func(in []*graph.Node) *graph.Node
	tol    float64
	covers bool // every op in fn has a Go kernel for these shapes: nothing may be handed back to simplego
}

func opCases() []opCase {
	var cases []opCase
	type bin struct {
		name string
		f    func(a, b *graph.Node) *graph.Node
	}
	bins := []bin{{"Add", graph.Add}, {"Sub", graph.Sub}, {"Mul", graph.Mul}, {"Div", graph.Div}, {"Max", graph.Max}, {"Min", graph.Min}}
	pairs := [][2][]int{
		{{3, 5, 7}, {3, 5, 7}},        // same shape
		{{3, 5, 7}, {3, 1, 7}},        // middle axis broadcast
		{{3, 5, 7}, {3, 5, 1}},        // last axis broadcast (softmax's x - max)
		{{1, 1, 7}, {3, 5, 7}},        // lhs broadcast on leading axes
		{{3, 5, 7}, {}},               // scalar
		{{4, 3000}, {4, 1}},           // rows longer than a block
		{{70001}, {70001}},            // one long row split across cores
		{{2, 8, 4, 33}, {2, 1, 4, 1}}, // broadcast on two separate axes
	}
	for _, b := range bins {
		for _, s := range pairs {
			cases = append(cases, opCase{
				name: fmt.Sprintf("%s%v%v", b.name, s[0], s[1]), inputs: [][]int{s[0], s[1]}, covers: true,
				fn: func(in []*graph.Node) *graph.Node { return b.f(in[0], in[1]) },
			})
		}
	}
	for _, dims := range [][]int{{5, 7}, {3, 50001}} {
		cases = append(cases,
			opCase{name: fmt.Sprintf("Exp%v", dims), inputs: [][]int{dims}, tol: 3e-7, covers: true,
				fn: func(in []*graph.Node) *graph.Node { return graph.Exp(in[0]) }},
			opCase{name: fmt.Sprintf("Logistic%v", dims), inputs: [][]int{dims}, tol: 3e-7, covers: true,
				fn: func(in []*graph.Node) *graph.Node { return graph.Logistic(in[0]) }},
		)
	}
	for _, r := range []struct {
		dims, axes []int
	}{
		{[]int{4, 6, 9}, []int{2}}, {[]int{4, 6, 9}, []int{0}}, {[]int{4, 6, 9}, []int{1}}, {[]int{4, 6, 9}, []int{0, 2}},
		{[]int{4, 6, 9}, []int{0, 1, 2}}, {[]int{8, 2, 2, 64, 300}, []int{4}}, {[]int{300, 257}, []int{0}}, {[]int{100000}, []int{0}},
	} {
		cases = append(cases,
			opCase{name: fmt.Sprintf("ReduceSum%v%v", r.dims, r.axes), inputs: [][]int{r.dims}, tol: 1e-4, covers: true,
				fn: func(in []*graph.Node) *graph.Node { return graph.ReduceSum(in[0], r.axes...) }},
			opCase{name: fmt.Sprintf("ReduceMax%v%v", r.dims, r.axes), inputs: [][]int{r.dims}, covers: true,
				fn: func(in []*graph.Node) *graph.Node { return graph.ReduceMax(in[0], r.axes...) }},
		)
	}
	for _, t := range []struct {
		dims, perm []int
	}{{[]int{2, 3, 4, 5}, []int{0, 2, 1, 3}}, {[]int{2, 3, 4, 5}, []int{3, 1, 2, 0}}, {[]int{64, 300}, []int{1, 0}}, {[]int{8, 2, 2, 64, 16}, []int{0, 3, 1, 2, 4}}} {
		cases = append(cases, opCase{name: fmt.Sprintf("Transpose%v%v", t.dims, t.perm), inputs: [][]int{t.dims}, covers: true,
			fn: func(in []*graph.Node) *graph.Node { return graph.TransposeAllAxes(in[0], t.perm...) }})
	}
	cases = append(cases,
		opCase{name: "BroadcastInDim[2,3]->[2,4,3]", inputs: [][]int{{2, 3}}, covers: true,
			fn: func(in []*graph.Node) *graph.Node { return graph.ExpandAndBroadcast(in[0], []int{2, 4, 3}, []int{1}) }},
		opCase{name: "BroadcastInDim[8,1,1,64,1]->[8,2,2,64,300]", inputs: [][]int{{8, 1, 1, 64, 1}}, covers: true,
			fn: func(in []*graph.Node) *graph.Node { return graph.BroadcastToDims(in[0], 8, 2, 2, 64, 300) }},
		opCase{name: "Where(x>0, x, 0)[3,5,7]", inputs: [][]int{{3, 5, 7}}, covers: true,
			fn: func(in []*graph.Node) *graph.Node {
				return graph.Where(graph.GreaterThan(in[0], graph.ScalarZero(in[0].Graph(), dtypes.Float32)), in[0], graph.ScalarZero(in[0].Graph(), dtypes.Float32))
			}},
		opCase{name: "Where(causal mask broadcast, x, -inf)[4,2,40,40]", inputs: [][]int{{4, 2, 40, 40}}, covers: true,
			fn: func(in []*graph.Node) *graph.Node {
				g := in[0].Graph()
				mask := graph.GreaterOrEqual(graph.Iota(g, shapes.Make(dtypes.Int32, 4, 1, 40, 40), 2), graph.Iota(g, shapes.Make(dtypes.Int32, 4, 1, 40, 40), 3))
				return graph.Where(graph.BroadcastToDims(mask, 4, 2, 40, 40), in[0], graph.Infinity(g, dtypes.Float32, -1))
			}},
		// A softmax chain: buffers handed from op to op and reused in place.
		opCase{name: "softmax chain", inputs: [][]int{{6, 3, 129}}, tol: 1e-5, covers: true,
			fn: func(in []*graph.Node) *graph.Node {
				x := graph.Sub(in[0], graph.ReduceAndKeep(in[0], graph.ReduceMax, -1))
				e := graph.Exp(x)
				return graph.Div(e, graph.ReduceAndKeep(e, graph.ReduceSum, -1))
			}},
	)
	// ScatterSum of whole rows, as a KV-cache write: operand [B, H, S, D], indices [N, 3], updates [N, D].
	scatter := func(name string, dims []int, idx [][]int, int64s, covers bool, operand func(x *graph.Node) *graph.Node) opCase {
		flat32, flat64 := []int32{}, []int64{}
		for _, v := range idx {
			for _, i := range v {
				flat32, flat64 = append(flat32, int32(i)), append(flat64, int64(i))
			}
		}
		return opCase{name: name, inputs: [][]int{dims, {len(idx), dims[len(dims)-1]}}, covers: covers,
			fn: func(in []*graph.Node) *graph.Node {
				g := in[0].Graph()
				indices := graph.Const(g, tensors.FromFlatDataAndDimensions(flat32, len(idx), len(dims)-1))
				if int64s {
					indices = graph.Const(g, tensors.FromFlatDataAndDimensions(flat64, len(idx), len(dims)-1))
				}
				return graph.ScatterSum(operand(in[0]), indices, in[1], false, false)
			}}
	}
	same := func(x *graph.Node) *graph.Node { return x }
	cursorRows := func(b, h, cursor int) [][]int { // one row per (sequence, head) at slot cursor
		var idx [][]int
		for i := range b {
			for j := range h {
				idx = append(idx, []int{i, j, cursor})
			}
		}
		return idx
	}
	cases = append(cases,
		scatter("ScatterSum rows at slot 5", []int{8, 2, 40, 64}, cursorRows(8, 2, 5), false, true, same),
		scatter("ScatterSum rows at the last slot", []int{8, 2, 40, 64}, cursorRows(8, 2, 39), false, true, same),
		scatter("ScatterSum rows, int64 indices", []int{3, 2, 7, 5}, cursorRows(3, 2, 6), true, true, same),
		// An intermediate operand is the op's to take: the rows are added in place.
		scatter("ScatterSum rows in place", []int{4, 2, 9, 16}, cursorRows(4, 2, 3), false, true,
			func(x *graph.Node) *graph.Node { return graph.Mul(x, x) }),
		// The same row twice: both updates are added.
		scatter("ScatterSum repeated rows", []int{2, 3, 4}, [][]int{{1, 2}, {0, 0}, {1, 2}}, false, true, same),
		scatter("ScatterSum rank 2", []int{6, 4}, [][]int{{5}, {0}}, false, true, same),
		// Out of bounds: simplego decides what that means (the kernel hands it back).
		scatter("ScatterSum index out of bounds", []int{2, 3, 4}, [][]int{{1, 2}, {0, 3}}, false, false, same),
	)
	return cases
}

// values fills n floats with a spread of magnitudes and signs, and the special values the kernels must keep.
func values(n int, seed float64) []float32 {
	x := make([]float32, n)
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 88.7, 89, -87.5, -95, -104, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.731+seed) * math.Exp(3*math.Cos(float64(i)*0.177+seed)))
	}
	for i, v := range special {
		if i*7 < n {
			x[i*7] = v
		}
	}
	return x
}

// TestGoKernelsMatchSimplego runs each op on simplego with the Go kernels and with simplego's own executors, on
// the same inputs, and requires the same results: bit for bit, or within tol for the ops whose arithmetic
// differs (exp's float32 polynomial, sums added in another order). NaNs must match NaNs.
func TestGoKernelsMatchSimplego(t *testing.T) { testGoKernelsMatchSimplego(t) }

// TestScalarGoKernelsMatchSimplego is TestGoKernelsMatchSimplego with the AVX2 kernels switched off: the scalar
// Go that other CPUs run.
func TestScalarGoKernelsMatchSimplego(t *testing.T) {
	withoutAVX2(func() { testGoKernelsMatchSimplego(t) })
}

func testGoKernelsMatchSimplego(t *testing.T) {
	backend := newBackend(t)
	for _, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			exec, err := graph.NewExec(backend, func(in []*graph.Node) *graph.Node { return c.fn(in) })
			if err != nil {
				t.Fatal(err)
			}
			run := func() []float32 {
				var ins []any
				for i, d := range c.inputs {
					ins = append(ins, tensors.FromFlatDataAndDimensions(values(size(d), float64(i)), d...))
				}
				res, err := exec.Exec(ins...)
				if err != nil {
					t.Fatal(err)
				}
				return tensors.MustCopyFlatData[float32](res[0])
			}
			SetGoKernels(false)
			want := run()
			SetGoKernels(true)
			before := handedBack.Load()
			got := run()
			if n := handedBack.Load() - before; c.covers && n != 0 {
				t.Errorf("%d ops handed back to simplego", n)
			}
			if len(got) != len(want) {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			for i := range want {
				g, w := float64(got[i]), float64(want[i])
				if math.IsNaN(w) || math.IsNaN(g) {
					if math.IsNaN(w) != math.IsNaN(g) {
						t.Fatalf("[%d] = %v, simplego %v", i, g, w)
					}
					continue
				}
				if g == w {
					continue
				}
				if c.tol == 0 || math.IsInf(w, 0) || math.Abs(g-w) > c.tol*math.Max(1, math.Abs(w)) {
					t.Fatalf("[%d] = %v, simplego %v", i, g, w)
				}
			}
		})
	}
}

// TestGoKernelsHandBack: what the kernels do not cover (float64) still runs, on simplego's executors.
func TestGoKernelsHandBack(t *testing.T) {
	backend := newBackend(t)
	before := handedBack.Load()
	got := graph.MustExecOnce(backend, func(x *graph.Node) *graph.Node {
		return graph.ReduceSum(graph.Exp(graph.Add(x, x)), 0)
	}, []float64{0, 1, 2})
	if n := handedBack.Load() - before; n != 3 {
		t.Errorf("%d ops handed back, want 3", n)
	}
	if v, want := got.Value().(float64), 1+math.Exp(2)+math.Exp(4); math.Abs(v-want) > 1e-12 {
		t.Errorf("got %v, want %v", v, want)
	}
}

// TestExp checks exp32 and expRow (AVX2 where the CPU has it, in place and not) against math.Exp over float32's
// whole range, edges included: within 2 ulp, 0 below ln(2^-149), +Inf above ln(MaxFloat32), NaN for NaN.
func TestExp(t *testing.T) {
	var xs []float32
	for x := float32(-110); x < 90; x += 0.0037 {
		xs = append(xs, x)
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 88.72283, 88.72284, 89, 1e6, -87.33654, -103.2789, -103.3, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	vec := make([]float32, len(xs))
	expRow(vec, xs)
	inPlace := append([]float32(nil), xs...)
	expRow(inPlace, inPlace)
	scalar := make([]float32, len(xs))
	withoutAVX2(func() { expRow(scalar, xs) })
	for name, f := range map[string]func(i int) float32{
		"exp32":           func(i int) float32 { return exp32(xs[i]) },
		"expRow":          func(i int) float32 { return vec[i] },
		"expRow in place": func(i int) float32 { return inPlace[i] },
		"expRow scalar":   func(i int) float32 { return scalar[i] },
	} {
		worst := 0.0
		for i, x := range xs {
			got, want := float64(f(i)), math.Exp(float64(x))
			switch {
			case math.IsNaN(want):
				if !math.IsNaN(got) {
					t.Fatalf("%s(%v) = %v, want NaN", name, x, got)
				}
				continue
			case want > math.MaxFloat32:
				if !math.IsInf(got, 1) {
					t.Fatalf("%s(%v) = %v, want +Inf", name, x, got)
				}
				continue
			case want < math.SmallestNonzeroFloat32/2:
				if got != 0 {
					t.Fatalf("%s(%v) = %v, want 0", name, x, got)
				}
				continue
			}
			ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want))
			if want < 1.1754944e-38 { // subnormal results: an absolute ulp
				ulp = math.SmallestNonzeroFloat32
			}
			worst = max(worst, math.Abs(got-want)/ulp)
		}
		if worst > 2 {
			t.Errorf("%s is off by up to %.2f ulp, want <= 2", name, worst)
		}
		t.Logf("%s: worst error %.2f ulp (AVX2: %v)", name, worst, haveAVX2)
	}
}

// TestBinaryRows: the row kernels (AVX2 where the CPU has it) equal Go's float32 arithmetic bit for bit, at
// every length around the 8-lane blocks, written to a separate output and in place over either operand.
func TestBinaryRows(t *testing.T) {
	kernels := []struct {
		name string
		row  func(o, a, b []float32)
		op   func(a, b float32) float32
	}{
		{"add", addRow, func(a, b float32) float32 { return a + b }},
		{"sub", subRow, func(a, b float32) float32 { return a - b }},
		{"mul", mulRow, func(a, b float32) float32 { return a * b }},
		{"div", divRow, func(a, b float32) float32 { return a / b }},
	}
	same := func(x, y float32) bool { return x == y || (x != x && y != y) }
	for _, k := range kernels {
		for n := 0; n <= 67; n++ {
			a, b := values(n, 0.5), values(n, 1.5)
			want := make([]float32, n)
			for i := range want {
				want[i] = k.op(a[i], b[i])
			}
			for _, mode := range []string{"out", "in place of a", "in place of b"} {
				aa, bb := append([]float32(nil), a...), append([]float32(nil), b...)
				o := make([]float32, n)
				switch mode {
				case "in place of a":
					o = aa
				case "in place of b":
					o = bb
				}
				k.row(o, aa, bb)
				for i := range want {
					if !same(o[i], want[i]) {
						t.Fatalf("%s, n=%d, %s: [%d] = %v, want %v", k.name, n, mode, i, o[i], want[i])
					}
				}
			}
		}
	}
}

// TestSumAndFill: sumRow (AVX2 where the CPU has it) agrees with a float64 sum at every length around its
// 32-element blocks, and fill writes exactly its range.
func TestSumAndFill(t *testing.T) {
	for n := 0; n <= 130; n++ {
		x := values(n+12, 2.5)[12:] // past values' special entries (NaN, Inf)
		want := 0.25
		abs := 0.25
		for _, v := range x {
			want += float64(v)
			abs += math.Abs(float64(v))
		}
		if got := float64(sumRow(0.25, x)); math.Abs(got-want) > 1e-6*abs {
			t.Fatalf("n=%d: sumRow = %v, want %v", n, got, want)
		}
		o := make([]float32, n+2)
		fill(o[1:n+1], 3.5)
		for i, v := range o {
			if w := float32(3.5); (i == 0 || i == n+1) && v != 0 || i > 0 && i <= n && v != w {
				t.Fatalf("n=%d: fill wrote %v at %d", n, v, i)
			}
		}
	}
}
