package train

import "testing"

func TestStepsEvery(t *testing.T) {
	for _, c := range []struct {
		v     float64
		total int
		want  int
	}{{10, 100, 10}, {0.1, 95, 10}, {0.001, 10, 1}, {500, 30, 500}} {
		if got := StepsEvery(c.v, c.total); got != c.want {
			t.Errorf("StepsEvery(%v, %d) = %d, want %d", c.v, c.total, got, c.want)
		}
	}
}
