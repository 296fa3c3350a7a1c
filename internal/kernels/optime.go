package kernels

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
)

// OpTimes times every op simplego executes, by op type and by op type with its input and output shapes: a
// per-op profile of a graph's execution (the benchmarks write one when $MCPRL_BENCH_OPTIME names a file).
// Starting one wraps the executors in place for every simplego backend in the process until Stop; it adds a
// clock read and a map update to each op, about a microsecond.
type OpTimes struct {
	mu      sync.Mutex
	byOp    map[string]*opTime
	byShape map[string]*opTime
	saved   [backends.OpTypeLast]executor
}

type opTime struct {
	n   int
	dur time.Duration
}

// StartOpTimes installs the timing wrappers (after Install; it fails when Install did).
func StartOpTimes() (*OpTimes, error) {
	if err := Install(); err != nil {
		return nil, err
	}
	t := &OpTimes{byOp: map[string]*opTime{}, byShape: map[string]*opTime{}}
	for op := range backends.OpTypeLast {
		ex := simplegoExecutors[op]
		if ex == nil {
			continue
		}
		t.saved[op] = ex
		name := op.String()
		setNodeExecutor(op, priorityUser, func(b *simplego.Backend, n *simplego.Node, in []*simplego.Buffer, own []bool) (*simplego.Buffer, error) {
			var key strings.Builder
			key.WriteString(name)
			for _, x := range in {
				if x != nil {
					fmt.Fprintf(&key, " %v", bufShape(x).Dimensions)
				}
			}
			fmt.Fprintf(&key, " -> %v", nodeShape(n).Dimensions)
			t0 := time.Now()
			out, err := ex(b, n, in, own)
			d := time.Since(t0)
			t.mu.Lock()
			t.add(t.byOp, name, d)
			t.add(t.byShape, key.String(), d)
			t.mu.Unlock()
			return out, err
		})
	}
	return t, nil
}

func (t *OpTimes) add(m map[string]*opTime, key string, d time.Duration) {
	s := m[key]
	if s == nil {
		s = &opTime{}
		m[key] = s
	}
	s.n++
	s.dur += d
}

// Stop puts the executors back as they were.
func (t *OpTimes) Stop() {
	for op, ex := range t.saved {
		if ex != nil {
			setNodeExecutor(backends.OpType(op), priorityUser, ex)
		}
	}
}

// Write writes the time per op type, then the rows longest ones by op and shapes, each per unit of work (the
// executions timed were per runs units: steps, tokens), with its share of the total and its count per unit.
func (t *OpTimes) Write(w io.Writer, runs, rows int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range []map[string]*opTime{t.byOp, t.byShape} {
		keys := make([]string, 0, len(m))
		var total time.Duration
		count := 0
		for k, s := range m {
			keys = append(keys, k)
			total += s.dur
			count += s.n
		}
		slices.SortFunc(keys, func(a, b string) int { return int(m[b].dur - m[a].dur) })
		if _, err := fmt.Fprintf(w, "ops: %.3f ms per unit, %d ops per unit\n", total.Seconds()*1e3/float64(runs), count/runs); err != nil {
			return err
		}
		for i, k := range keys {
			if i == rows {
				break
			}
			s := m[k]
			if _, err := fmt.Fprintf(w, "%9.3f ms %5.1f%% %7.1f/unit  %s\n", s.dur.Seconds()*1e3/float64(runs), 100*s.dur.Seconds()/total.Seconds(), float64(s.n)/float64(runs), k); err != nil {
				return err
			}
		}
	}
	return nil
}
