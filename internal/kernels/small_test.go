package kernels

import (
	"math"
	"testing"
)

// TestSmallDot compares the small-product kernels with a float64 product on every row count up to SmallRows,
// column counts with and without a partial block, column ranges that start inside the matrix, and both
// layouts of b.
func TestSmallDot(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	var scratch []float32 // reused with leftovers of earlier products in it
	for _, bCrossFirst := range []bool{true, false} {
		align := smallAlign(bCrossFirst)
		for _, k := range []int{16, 64, 80, 256} {
			for m := 1; m <= SmallRows; m++ {
				for _, n := range []int{align, 2*align + 3, 3 * align, 200} {
					a, b := fillSin(m*k, float64(m)), fillSin(n*k, float64(n)+0.5)
					for _, r := range [][2]int{{0, n}, {align, n}, {0, align}} {
						n0, n1 := r[0], min(r[1], n)
						if n0 >= n1 {
							continue
						}
						c := fillSin(m*n, 9) // columns outside n0..n1 must stay
						before := append([]float32(nil), c...)
						smallDot(m, n, k, a, b, bCrossFirst, c, n0, n1, &scratch)
						for i := range m {
							for j := range n {
								got := c[i*n+j]
								if j < n0 || j >= n1 {
									if got != before[i*n+j] {
										t.Fatalf("bCrossFirst %v m %d n %d k %d cols %d-%d: c[%d,%d] changed", bCrossFirst, m, n, k, n0, n1, i, j)
									}
									continue
								}
								var want float64
								for p := range k {
									bv := b[p*n+j]
									if bCrossFirst {
										bv = b[j*k+p]
									}
									want += float64(a[i*k+p]) * float64(bv)
								}
								if d := math.Abs(float64(got) - want); d > 1e-5*(1+math.Abs(want))*math.Sqrt(float64(k)) {
									t.Fatalf("bCrossFirst %v m %d n %d k %d cols %d-%d: c[%d,%d] = %v, want %v", bCrossFirst, m, n, k, n0, n1, i, j, got, want)
								}
							}
						}
					}
				}
			}
		}
	}
}
