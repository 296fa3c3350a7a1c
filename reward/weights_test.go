package reward

import (
	"math"
	"testing"
)

// TestWeightedSums: TRL's nansum over reward functions (a NaN score is left
// out; all NaN is NaN), rows checked against the weights.
func TestWeightedSums(t *testing.T) {
	nan := math.NaN()
	got, err := WeightedSums([][]float64{{1, 0.5}, {nan, 2}, {nan, nan}}, []float64{2, -1})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 1.5 || got[1] != -2 || !math.IsNaN(got[2]) {
		t.Errorf("WeightedSums = %v, want [1.5 -2 NaN]", got)
	}
	if _, err := WeightedSums([][]float64{{1}}, []float64{1, 1}); err == nil {
		t.Error("row shorter than weights: want an error")
	}
}

// TestWeightedSumVeto: the first non-zero veto term is the sum alone;
// a zero or NaN veto term vetoes nothing.
func TestWeightedSumVeto(t *testing.T) {
	nan := math.NaN()
	weights := []float64{0.3, 0.5, 0.7}
	veto := []bool{false, true, true}
	for _, c := range []struct {
		scores []float64
		want   float64
		by     int
	}{
		{[]float64{1, 0, 0}, 0.3, -1},
		{[]float64{1, -1, 0}, -0.5, 1},
		{[]float64{1, -1, -1}, -0.5, 1},
		{[]float64{1, 0, 2}, 1.4, 2},
		{[]float64{1, nan, 0}, 0.3, -1},
	} {
		got, by := WeightedSum(c.scores, weights, veto)
		if got != c.want || by != c.by {
			t.Errorf("WeightedSum(%v) = %v by %d, want %v by %d", c.scores, got, by, c.want, c.by)
		}
	}
}
