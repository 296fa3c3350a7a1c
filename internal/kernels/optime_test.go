package kernels

import (
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestOpTimes: every op of a graph is counted under its type and shapes while the timers run, and none after
// Stop, which leaves the graph computing the same values.
func TestOpTimes(t *testing.T) {
	backend := newBackend(t)
	exec, err := graph.NewExec(backend, func(a, b *graph.Node) *graph.Node {
		return graph.Exp(graph.Add(a, b))
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b := tensors.FromFlatDataAndDimensions(values(6, 1), 2, 3), tensors.FromFlatDataAndDimensions(values(6, 2), 2, 3)
	want := tensors.MustCopyFlatData[float32](exec.MustExec(a, b)[0])
	times, err := StartOpTimes()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got := tensors.MustCopyFlatData[float32](exec.MustExec(a, b)[0])
		if !slices.Equal(got, want) {
			t.Fatalf("timed: %v, want %v", got, want)
		}
	}
	times.Stop()
	exec.MustExec(a, b)
	var out strings.Builder
	if err := times.Write(&out, 3, 10); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	for _, line := range []string{"1.0/unit  Add [2 3] [2 3] -> [2 3]", "1.0/unit  Exp [2 3] -> [2 3]", "2 ops per unit"} {
		if !strings.Contains(report, line) {
			t.Errorf("report lacks %q:\n%s", line, report)
		}
	}
}
