package sqldb

import "testing"

// Empty: no rows, or one cell holding 0 in any spelling; a NULL, a non-zero count or more cells are answers.
func TestResultEmpty(t *testing.T) {
	for _, c := range []struct {
		r    *Result
		want bool
	}{
		{nil, true},
		{&Result{Columns: []string{"id"}}, true},
		{&Result{Rows: [][]any{{int64(0)}}}, true},
		{&Result{Rows: [][]any{{0.0}}}, true},
		{&Result{Rows: [][]any{{" 0.00"}}}, true},
		{&Result{Rows: [][]any{{nil}}}, false},
		{&Result{Rows: [][]any{{int64(3)}}}, false},
		{&Result{Rows: [][]any{{int64(0), "x"}}}, false},
		{&Result{Rows: [][]any{{int64(0)}, {int64(0)}}}, false},
		{&Result{Rows: [][]any{{false}}}, false},
	} {
		if got := c.r.Empty(); got != c.want {
			t.Errorf("%+v: Empty() = %v, want %v", c.r, got, c.want)
		}
	}
}
