package model_test

import (
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/model"
)

// Forward's log-probs are the log-softmax of its own logits at the next
// token, 0 at the first position and under padding; bad rows are refused
// with the row named.
func TestForward(t *testing.T) {
	m := tinyModel(t)
	toks := [][]int32{{5, 17, 42, 8, 3}, {0, 0, 9, 61, 7}}
	mask := [][]int32{{1, 1, 1, 1, 1}, {0, 0, 1, 1, 1}}
	logits, lp, err := m.Forward(toks, mask)
	if err != nil {
		t.Fatal(err)
	}
	l := tensors.MustCopyFlatData[float32](logits)
	p := tensors.MustCopyFlatData[float32](lp)
	v := m.Config.VocabSize
	if got, want := len(l), 2*5*v; got != want {
		t.Fatalf("%d logits, want %d", got, want)
	}
	for b := range toks {
		for i := range toks[b] {
			got := float64(p[b*5+i])
			want, scale := 0.0, 1.0
			if i > 0 && mask[b][i-1] == 1 && mask[b][i] == 1 {
				row := l[(b*5+i-1)*v : (b*5+i)*v]
				mx := math.Inf(-1)
				for _, x := range row {
					mx = math.Max(mx, float64(x))
				}
				sum := 0.0
				for _, x := range row {
					sum += math.Exp(float64(x) - mx)
				}
				want = float64(row[toks[b][i]]) - mx - math.Log(sum)
				scale = 1 + math.Abs(float64(row[toks[b][i]])) + math.Abs(mx) + math.Abs(want)
			}
			// A float32 log-softmax: a vocabulary-size sum and roundings of the terms it subtracts.
			if math.Abs(got-want) > model.DotTol(v, scale) {
				t.Errorf("row %d position %d: log-prob %v, want %v from the logits", b, i, got, want)
			}
		}
	}
	for _, bad := range []struct {
		toks, mask [][]int32
		want       string
	}{
		{[][]int32{{1, 2}, {3}}, [][]int32{{1, 1}, {1}}, "row 1 has 1 tokens"},
		{[][]int32{{1, 2}}, nil, "1 token rows and 0 mask rows"},
		{[][]int32{{1, int32(v)}}, [][]int32{{1, 1}}, "outside the vocabulary"},
	} {
		if _, _, err := m.Forward(bad.toks, bad.mask); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Forward(%v, %v) = %v, want an error containing %q", bad.toks, bad.mask, err, bad.want)
		}
	}
}
