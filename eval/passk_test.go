package eval

import (
	"math"
	"math/big"
	"testing"
)

// exactPassAtK is 1 - C(n-c,k)/C(n,k) in exact rational arithmetic.
func exactPassAtK(n, c, k int) float64 {
	num := new(big.Int).Binomial(int64(n-c), int64(k)) // 0 when n-c < k
	den := new(big.Int).Binomial(int64(n), int64(k))
	r := new(big.Rat).SetFrac(num, den)
	f, _ := new(big.Rat).Sub(big.NewRat(1, 1), r).Float64()
	return f
}

func TestPassAtKMatchesFormula(t *testing.T) {
	cases := [][3]int{
		{1, 0, 1}, {1, 1, 1}, // n = k, c = 0 and c = n
		{5, 0, 5}, {5, 5, 5}, {5, 1, 5}, {5, 3, 5}, // n = k: any success passes
		{10, 0, 1}, {10, 10, 1}, {10, 3, 1}, {10, 3, 5}, {10, 7, 3}, {10, 1, 10},
		{20, 2, 10}, {100, 1, 1}, {100, 13, 10}, {100, 50, 50},
		{1000, 1, 100}, {1000, 37, 200}, {1000, 999, 1}, {1000, 0, 1000}, {1000, 1000, 1000}, // large n
		{5000, 12, 500},
	}
	for _, tc := range cases {
		n, c, k := tc[0], tc[1], tc[2]
		got, err := PassAtK(n, c, k)
		if err != nil {
			t.Fatalf("PassAtK(%d,%d,%d): %v", n, c, k, err)
		}
		want := exactPassAtK(n, c, k)
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("PassAtK(n=%d, c=%d, k=%d) = %.17g, want %.17g", n, c, k, got, want)
		}
	}
	// Known closed forms: pass@1 is c/n; c = 0 gives 0; c = n gives 1.
	for n := 1; n <= 30; n++ {
		for c := 0; c <= n; c++ {
			p, _ := PassAtK(n, c, 1)
			if math.Abs(p-float64(c)/float64(n)) > 1e-15 {
				t.Errorf("pass@1 n=%d c=%d = %v, want %v", n, c, p, float64(c)/float64(n))
			}
			if p, _ := PassAtK(n, c, n); (c > 0) != (p == 1) || (c == 0) != (p == 0) {
				t.Errorf("pass@%d n=%d c=%d = %v, want %v", n, n, c, p, c > 0)
			}
		}
	}
}

func TestPassAtKRejectsBadCounts(t *testing.T) {
	for _, tc := range [][3]int{{0, 0, 1}, {5, 6, 1}, {5, -1, 1}, {5, 2, 0}, {5, 2, 6}} {
		if _, err := PassAtK(tc[0], tc[1], tc[2]); err == nil {
			t.Errorf("PassAtK(%v) gave no error", tc)
		}
	}
}
