package kernels

import (
	"math"
	"os"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// requireOpenBLAS installs the OpenBLAS DotGeneral; without the library the test is skipped locally and fails
// under CI ($CI set), where scripts/test-setup.sh installs libopenblas0.
func requireOpenBLAS(t testing.TB) *Lib {
	t.Helper()
	lib, err := OpenBLAS()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return lib
}

func fillSin(n int, seed float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.37+seed)) + 0.1
	}
	return x
}

// dotBound is how far a float32 dot product of k terms may be from its exact value, in any order of addition and
// with or without fused multiply-adds: γ_k·Σ|a_p·b_p|, γ_k = k·u/(1-k·u), u = 2^-24 the unit roundoff (Higham,
// Accuracy and Stability of Numerical Algorithms, 3.1). It holds on every CPU and matmul engine, so a kernel
// that rounds differently stays within it and a wrong one does not.
func dotBound(absSum float64, k int) float64 {
	const u = 0x1p-24
	return float64(k) * u / (1 - float64(k)*u) * absSum
}

func absAll(x []float32) []float32 {
	a := make([]float32, len(x))
	for i, v := range x {
		a[i] = float32(math.Abs(float64(v)))
	}
	return a
}

func TestSgemm(t *testing.T) {
	lib := requireOpenBLAS(t)
	m, n, k := 5, 7, 3
	a, b := fillSin(m*k, 0.1), fillSin(k*n, 0.7)
	for _, tc := range []struct{ transA, transB bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		at := func(i, p int) float32 { // a[i][p]
			if tc.transA {
				return a[p*m+i]
			}
			return a[i*k+p]
		}
		bt := func(p, j int) float32 { // b[p][j]
			if tc.transB {
				return b[j*k+p]
			}
			return b[p*n+j]
		}
		lda, ldb := k, n
		if tc.transA {
			lda = m
		}
		if tc.transB {
			ldb = k
		}
		c := fillSin(m*n, 3) // overwritten
		lib.Sgemm(tc.transA, tc.transB, m, n, k, a, lda, b, ldb, c)
		for i := range m {
			for j := range n {
				var want, abs float64
				for p := range k {
					want += float64(at(i, p)) * float64(bt(p, j))
					abs += math.Abs(float64(at(i, p)) * float64(bt(p, j)))
				}
				if d := math.Abs(float64(c[i*n+j]) - want); d > dotBound(abs, k) {
					t.Fatalf("trans %v/%v c[%d,%d] = %v, want %v", tc.transA, tc.transB, i, j, c[i*n+j], want)
				}
			}
		}
	}
}

// einsum is the reference DotGeneral: out[batch..., lhsCross..., rhsCross...] in float64.
func einsum(lhs []float32, ld []int, lc, lb []int, rhs []float32, rd []int, rc, rb []int) []float64 {
	role := func(dims, c, b []int) []int {
		r := make([]int, len(dims))
		for _, a := range c {
			r[a] = 1
		}
		for _, a := range b {
			r[a] = 2
		}
		return r
	}
	lr, rr := role(ld, lc, lb), role(rd, rc, rb)
	var lCross, rCross []int
	for a, r := range lr {
		if r == 0 {
			lCross = append(lCross, a)
		}
	}
	for a, r := range rr {
		if r == 0 {
			rCross = append(rCross, a)
		}
	}
	// Output axes: lhs batch, lhs cross, rhs cross; contracting enumerated separately.
	var outDims []int
	for _, a := range lb {
		outDims = append(outDims, ld[a])
	}
	for _, a := range lCross {
		outDims = append(outDims, ld[a])
	}
	for _, a := range rCross {
		outDims = append(outDims, rd[a])
	}
	var cDims []int
	for _, a := range lc {
		cDims = append(cDims, ld[a])
	}
	offset := func(dims, idx []int) int {
		o := 0
		for a := range dims {
			o = o*dims[a] + idx[a]
		}
		return o
	}
	size := func(d []int) int {
		n := 1
		for _, x := range d {
			n *= x
		}
		return n
	}
	unravel := func(i int, dims []int) []int {
		idx := make([]int, len(dims))
		for a := len(dims) - 1; a >= 0; a-- {
			idx[a] = i % dims[a]
			i /= dims[a]
		}
		return idx
	}
	out := make([]float64, size(outDims))
	for o := range out {
		oi := unravel(o, outDims)
		li, ri := make([]int, len(ld)), make([]int, len(rd))
		pos := 0
		for j, a := range lb {
			li[a], ri[rb[j]] = oi[pos], oi[pos]
			pos++
		}
		for _, a := range lCross {
			li[a] = oi[pos]
			pos++
		}
		for _, a := range rCross {
			ri[a] = oi[pos]
			pos++
		}
		var s float64
		for c := range size(cDims) {
			ci := unravel(c, cDims)
			for j, a := range lc {
				li[a], ri[rc[j]] = ci[j], ci[j]
			}
			s += float64(lhs[offset(ld, li)]) * float64(rhs[offset(rd, ri)])
		}
		out[o] = s
	}
	return out
}

// TestDotGeneral: simplego with the OpenBLAS executor equals a float64 reference on every axis layout that takes
// a different path (in place, transposed flags, transposition, batch axes not in front, two contracting axes,
// split by rows or by columns across cores), below MinWork (simplego's own kernel), on the small-product kernels
// (few rows, on CPUs with AVX-512; OpenBLAS with them switched off) and in float64 (simplego's own kernel).
func TestDotGeneral(t *testing.T) {
	lib := requireOpenBLAS(t)
	backend := newBackend(t)
	cases := []struct {
		name           string
		lhs, rhs       []int
		lc, lb, rc, rb []int
		small          bool // runs on the small-product kernels where the CPU has AVX-512
		below          bool // below MinWork: simplego's kernel rather than OpenBLAS
	}{
		{name: "linear [B,T,in]x[out,in]", lhs: []int{2, 48, 64}, rhs: []int{96, 64}, lc: []int{2}, rc: []int{1}},
		{name: "decoding [B,in]x[out,in], split by columns", lhs: []int{8, 256}, rhs: []int{704, 256}, lc: []int{1}, rc: []int{1}, small: true},
		{name: "[M,K]x[K,N]", lhs: []int{64, 80}, rhs: []int{80, 72}, lc: []int{1}, rc: []int{0}},
		{name: "[K,M]x[K,N]", lhs: []int{80, 64}, rhs: []int{80, 72}, lc: []int{0}, rc: []int{0}},
		{name: "attention [B,H,T,d]x[B,H,S,d]", lhs: []int{2, 3, 40, 32}, rhs: []int{2, 3, 48, 32}, lc: []int{3}, lb: []int{0, 1}, rc: []int{3}, rb: []int{0, 1}},
		{name: "batch axes not in front", lhs: []int{40, 2, 3, 32}, rhs: []int{2, 48, 3, 32}, lc: []int{3}, lb: []int{1, 2}, rc: []int{3}, rb: []int{0, 2}},
		{name: "two contracting axes, reversed", lhs: []int{8, 40, 12}, rhs: []int{12, 64, 8}, lc: []int{0, 2}, rc: []int{2, 0}},
		{name: "below MinWork", lhs: []int{4, 5, 6}, rhs: []int{7, 6}, lc: []int{2}, rc: []int{1}, below: true},
		{name: "decoding attention scores [B,H,2,d]x[B,H,S,d]", lhs: []int{2, 3, 2, 64}, rhs: []int{2, 3, 48, 64}, lc: []int{3}, lb: []int{0, 1}, rc: []int{3}, rb: []int{0, 1}, small: true, below: true},
		{name: "decoding attention values [B,H,2,S]x[B,H,S,d]", lhs: []int{2, 3, 2, 48}, rhs: []int{2, 3, 48, 64}, lc: []int{3}, lb: []int{0, 1}, rc: []int{2}, rb: []int{0, 1}, small: true, below: true},
		{name: "13 rows, partial column blocks", lhs: []int{13, 80}, rhs: []int{70, 80}, lc: []int{1}, rc: []int{1}, small: true},
		{name: "[B,S]x[S,N], partial column blocks", lhs: []int{5, 80}, rhs: []int{80, 150}, lc: []int{1}, rc: []int{0}, small: true},
		{name: "few rows stored [K,M]", lhs: []int{80, 8}, rhs: []int{70, 80}, lc: []int{0}, rc: []int{1}},
		{name: "few rows, K not a multiple of 16", lhs: []int{8, 300}, rhs: []int{70, 300}, lc: []int{1}, rc: []int{1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := func(d []int) int {
				s := 1
				for _, x := range d {
					s *= x
				}
				return s
			}
			lhs, rhs := fillSin(n(c.lhs), 0.1), fillSin(n(c.rhs), 0.7)
			want := einsum(lhs, c.lhs, c.lc, c.lb, rhs, c.rhs, c.rc, c.rb)
			absSum := einsum(absAll(lhs), c.lhs, c.lc, c.lb, absAll(rhs), c.rhs, c.rc, c.rb)
			k := 1
			for _, a := range c.lc {
				k *= c.lhs[a]
			}
			exec, err := graph.NewExec(backend, func(l, r *graph.Node) *graph.Node {
				return graph.DotGeneral(l, c.lc, c.lb, r, c.rc, c.rb)
			})
			if err != nil {
				t.Fatal(err)
			}
			small := c.small && haveAVX512
			// The small-product kernels where they apply, then OpenBLAS with them switched off.
			for _, smallOn := range []bool{true, false} {
				lib.SetSmallDot(smallOn)
				before, beforeSmall := lib.Calls(), lib.SmallCalls()
				res, err := exec.Exec(tensors.FromFlatDataAndDimensions(lhs, c.lhs...), tensors.FromFlatDataAndDimensions(rhs, c.rhs...))
				lib.SetSmallDot(true)
				if err != nil {
					t.Fatal(err)
				}
				ranSmall := lib.SmallCalls() - beforeSmall
				if want := smallOn && small; (ranSmall == 1) != want {
					t.Errorf("small kernels on %v: ran %d times, want them to run: %v", smallOn, ranSmall, want)
				}
				if ran, want := lib.Calls()-before, !c.below && !(smallOn && small); (ran == 1) != want {
					t.Errorf("small kernels on %v: OpenBLAS ran %d times, want it to run: %v", smallOn, ran, want)
				}
				got := tensors.MustCopyFlatData[float32](res[0])
				if len(got) != len(want) {
					t.Fatalf("got %d values, want %d", len(got), len(want))
				}
				for i := range want {
					if d := math.Abs(float64(got[i]) - want[i]); d > dotBound(absSum[i], k) {
						t.Fatalf("small kernels on %v: [%d] = %v, want %v", smallOn, i, got[i], want[i])
					}
				}
			}
			// simplego's own kernel agrees, and does not count as an OpenBLAS call.
			SetOpenBLAS(false)
			before := lib.Calls()
			res, err := exec.Exec(tensors.FromFlatDataAndDimensions(lhs, c.lhs...), tensors.FromFlatDataAndDimensions(rhs, c.rhs...))
			SetOpenBLAS(true)
			if err != nil {
				t.Fatal(err)
			}
			if lib.Calls() != before {
				t.Error("OpenBLAS ran while disabled")
			}
			for i, v := range tensors.MustCopyFlatData[float32](res[0]) {
				if d := math.Abs(float64(v) - want[i]); d > dotBound(absSum[i], k) {
					t.Fatalf("simplego [%d] = %v, want %v", i, v, want[i])
				}
			}
			// Float64 keeps simplego's kernel and agrees too.
			lhs64, rhs64 := make([]float64, len(lhs)), make([]float64, len(rhs))
			for i, v := range lhs {
				lhs64[i] = float64(v)
			}
			for i, v := range rhs {
				rhs64[i] = float64(v)
			}
			res, err = exec.Exec(tensors.FromFlatDataAndDimensions(lhs64, c.lhs...), tensors.FromFlatDataAndDimensions(rhs64, c.rhs...))
			if err != nil {
				t.Fatal(err)
			}
			if res[0].DType() != dtypes.Float64 {
				t.Fatalf("dtype %s", res[0].DType())
			}
			got64 := tensors.MustCopyFlatData[float64](res[0])
			for i := range want {
				if d := math.Abs(got64[i] - want[i]); d > 1e-9*(1+math.Abs(want[i])) {
					t.Fatalf("float64 [%d] = %v, want %v", i, got64[i], want[i])
				}
			}
		})
	}
}
