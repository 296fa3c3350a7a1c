package reward

import (
	"fmt"
	"math"
)

// WeightedSum is the one rule by which mcprl adds rewards: the weighted sum
// of one trajectory's scores, scores[k] from the function weighted
// weights[k], as TRL sums reward_funcs with reward_weights. A NaN score
// (TRL's None: the function did not apply, or could not score) is left out,
// and a trajectory whose every score is NaN sums to NaN (unscorable).
//
// veto (nil for none) marks veto terms: the first veto term whose score is
// non-zero replaces the sum, which is then its weight*score alone (the
// user's function returns -0.5 for a hallucinated tool whatever else the
// call got right). The trainer's reward_weights have no vetoes; a Weighted
// reward's terms may. It returns the index of the vetoing term, or -1.
func WeightedSum(scores, weights []float64, veto []bool) (sum float64, vetoedBy int) {
	any := false
	for k, s := range scores {
		if math.IsNaN(s) {
			continue
		}
		if k < len(veto) && veto[k] && s != 0 {
			return weights[k] * s, k
		}
		sum += s * weights[k]
		any = true
	}
	if !any && len(scores) > 0 {
		return math.NaN(), -1
	}
	return sum, -1
}

// WeightedSums is WeightedSum without vetoes over the rows of a batch:
// rows[i][k] is trajectory i's score from function k.
func WeightedSums(rows [][]float64, weights []float64) ([]float64, error) {
	out := make([]float64, len(rows))
	for i, row := range rows {
		if len(row) != len(weights) {
			return nil, fmt.Errorf("weighted rewards: completion %d has %d rewards, want %d (one per weight)", i, len(row), len(weights))
		}
		out[i], _ = WeightedSum(row, weights, nil)
	}
	return out, nil
}
