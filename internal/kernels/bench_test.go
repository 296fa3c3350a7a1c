package kernels

import (
	"math"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Benchmarks (not run by go test without -bench):
//
//	go test ./internal/kernels -run '^$' -bench .
//
// BenchmarkRows compares the row kernels with the plain Go loops (and math.Exp) they replace, in the same run.
// BenchmarkOps runs single ops of a training step's shapes as graphs on simplego, with the Go kernels and with
// simplego's own executors, in the same run.

func BenchmarkRows(b *testing.B) {
	const n = 8 * 256 * 256
	x, y, o := values(n+12, 1)[12:], values(n+12, 2)[12:], make([]float32, n)
	for i := range x {
		x[i] = float32(math.Mod(float64(x[i]), 20)) // finite, in exp's working range
	}
	rate := func(b *testing.B, bytesPerElem float64) float64 {
		return bytesPerElem * n * float64(b.N) / b.Elapsed().Seconds() / 1e9
	}
	var add, addGo, exp, expGo, logistic float64
	b.Run("add", func(b *testing.B) {
		for range b.N {
			addRow(o, x, y)
		}
		add = rate(b, 12)
		b.ReportMetric(add, "GB/s")
	})
	b.Run("add-go-loop", func(b *testing.B) {
		for range b.N {
			for i := range o {
				o[i] = x[i] + y[i]
			}
		}
		addGo = rate(b, 12)
		b.ReportMetric(addGo, "GB/s")
	})
	b.Run("exp", func(b *testing.B) {
		for range b.N {
			expRow(o, x)
		}
		exp = rate(b, 1)
		b.ReportMetric(exp, "Gelem/s")
	})
	b.Run("exp-math.Exp", func(b *testing.B) {
		for range b.N {
			for i, v := range x {
				o[i] = float32(math.Exp(float64(v)))
			}
		}
		expGo = rate(b, 1)
		b.ReportMetric(expGo, "Gelem/s")
	})
	b.Run("logistic", func(b *testing.B) {
		for range b.N {
			logisticRow(o, x)
		}
		logistic = rate(b, 1)
		b.ReportMetric(logistic, "Gelem/s")
	})
	if addGo > 0 && expGo > 0 {
		b.Logf("AVX2 %v: add %.1f GB/s = %.1fx the Go loop; exp %.2f Gelem/s = %.1fx math.Exp; logistic %.2f Gelem/s",
			haveAVX2, add, add/addGo, exp, exp/expGo, logistic)
	}
}

func BenchmarkOps(b *testing.B) {
	backend := newBackend(b)
	ops := []struct {
		name   string
		inputs [][]int
		fn     func(in []*graph.Node) *graph.Node
	}{
		{"Add [8,256,256]", [][]int{{8, 256, 256}, {8, 256, 256}}, func(in []*graph.Node) *graph.Node { return graph.Add(in[0], in[1]) }},
		{"Mul [8,256,704] by a scalar", [][]int{{8, 256, 704}, {}}, func(in []*graph.Node) *graph.Node { return graph.Mul(in[0], in[1]) }},
		{"Sub [8,2,2,256,256] - [8,2,2,256,1]", [][]int{{8, 2, 2, 256, 256}, {8, 2, 2, 256, 1}}, func(in []*graph.Node) *graph.Node { return graph.Sub(in[0], in[1]) }},
		{"Exp [8,2,2,256,256]", [][]int{{8, 2, 2, 256, 256}}, func(in []*graph.Node) *graph.Node { return graph.Exp(in[0]) }},
		{"Logistic [8,256,704]", [][]int{{8, 256, 704}}, func(in []*graph.Node) *graph.Node { return graph.Logistic(in[0]) }},
		{"ReduceMax rows [8,2,2,256,256]", [][]int{{8, 2, 2, 256, 256}}, func(in []*graph.Node) *graph.Node { return graph.ReduceMax(in[0], -1) }},
		{"ReduceSum columns [2048,256]", [][]int{{2048, 256}}, func(in []*graph.Node) *graph.Node { return graph.ReduceSum(in[0], 0) }},
		{"Transpose [8,256,2,2,64] -> [8,2,2,256,64]", [][]int{{8, 256, 2, 2, 64}}, func(in []*graph.Node) *graph.Node { return graph.TransposeAllAxes(in[0], 0, 2, 3, 1, 4) }},
		{"BroadcastInDim [8,2,2,256,1] -> [8,2,2,256,256]", [][]int{{8, 2, 2, 256, 1}}, func(in []*graph.Node) *graph.Node { return graph.BroadcastToDims(in[0], 8, 2, 2, 256, 256) }},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			exec, err := graph.NewExec(backend, func(in []*graph.Node) *graph.Node { return op.fn(in) })
			if err != nil {
				b.Fatal(err)
			}
			var ins []any
			for i, d := range op.inputs {
				ins = append(ins, tensors.FromFlatDataAndDimensions(values(size(d), float64(i)), d...))
			}
			run := func() time.Duration {
				t0 := time.Now()
				res, err := exec.Exec(ins...)
				if err != nil {
					b.Fatal(err)
				}
				d := time.Since(t0)
				res[0].FinalizeAll()
				return d
			}
			best := func() time.Duration {
				m := time.Hour
				for range 5 {
					m = min(m, run())
				}
				return m
			}
			run() // compile
			var mine, theirs time.Duration
			for range b.N {
				mine += best()
				SetGoKernels(false)
				theirs += best()
				SetGoKernels(true)
			}
			b.ReportMetric(float64(mine.Microseconds())/float64(b.N), "us-go-kernels")
			b.ReportMetric(float64(theirs.Microseconds())/float64(b.N), "us-simplego")
			b.ReportMetric(float64(theirs)/float64(mine), "speedup")
		})
	}
}
