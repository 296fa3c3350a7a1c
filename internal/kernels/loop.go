package kernels

import (
	"runtime"
	"sync"
)

// plan is a loop nest over a row-major index space of dims, with each operand's element stride on every axis
// (0 where the operand is broadcast, or where a reduction's output stays put). Axes of size 1 are dropped and
// neighbours that every operand walks contiguously are merged, so that the innermost axis is as long as it can
// be: the kernels work a row at a time.
type plan struct {
	dims    []int
	strides [][]int // [operand][axis]
}

func makePlan(dims []int, strides ...[]int) plan {
	// One backing array for every axis list (an op's plan is built on each run: allocations add up).
	n := max(len(dims), 1)
	buf := make([]int, n*(1+len(strides)))
	p := plan{dims: buf[:0:n], strides: make([][]int, len(strides))}
	for k := range strides {
		p.strides[k] = buf[n*(k+1) : n*(k+1) : n*(k+2)]
	}
	for a, d := range dims {
		if d == 1 {
			continue
		}
		last := len(p.dims) - 1
		if last >= 0 && mergeable(p, strides, a, d) {
			p.dims[last] *= d
			for k := range strides {
				p.strides[k][last] = strides[k][a]
			}
			continue
		}
		p.dims = append(p.dims, d)
		for k := range strides {
			p.strides[k] = append(p.strides[k], strides[k][a])
		}
	}
	if len(p.dims) == 0 {
		p.dims = append(p.dims, 1)
		for k := range p.strides {
			p.strides[k] = append(p.strides[k], 0)
		}
	}
	return p
}

// mergeable reports whether axis a of the original nest, of size d, continues p's last axis for every operand.
func mergeable(p plan, strides [][]int, a, d int) bool {
	for k := range strides {
		if p.strides[k][len(p.dims)-1] != strides[k][a]*d {
			return false
		}
	}
	return true
}

// maxBlock is the longest stretch of a row a kernel is handed at once: long enough to amortise the loop
// overhead, short enough that scratch copies stay in the L1 cache and that one long row still splits across
// cores.
const maxBlock = 2048

// inner is the length of a row; stride(k) is operand k's stride along it.
func (p plan) inner() int       { return p.dims[len(p.dims)-1] }
func (p plan) stride(k int) int { return p.strides[k][len(p.dims)-1] }

// units is the number of work units (stretches of rows up to block elements long): the unit of parallel work.
func (p plan) units(block int) int {
	n := (p.inner() + block - 1) / block
	for _, d := range p.dims[:len(p.dims)-1] {
		n *= d
	}
	return n
}

// each calls fn with every operand's offset at the start of the work units lo to hi-1 (stretches of rows of at
// most block elements), in order, and the unit's length.
func (p plan) each(block, lo, hi int, fn func(off []int, n int)) {
	w := p.inner()
	per := (w + block - 1) / block // units per row
	outer := p.dims[:len(p.dims)-1]
	buf := make([]int, len(outer)+2*len(p.strides))
	idx := buf[:len(outer)]
	base := buf[len(outer) : len(outer)+len(p.strides)] // offsets at the start of the current row
	off := buf[len(outer)+len(p.strides):]
	r := lo / per
	for a := len(outer) - 1; a >= 0; a-- {
		idx[a] = r % outer[a]
		r /= outer[a]
		for k := range base {
			base[k] += idx[a] * p.strides[k][a]
		}
	}
	j := lo % per
	for range hi - lo {
		start := j * block
		for k := range off {
			off[k] = base[k] + start*p.strides[k][len(outer)]
		}
		fn(off, min(block, w-start))
		if j++; j < per {
			continue
		}
		j = 0
		for a := len(outer) - 1; a >= 0; a-- {
			idx[a]++
			for k := range base {
				base[k] += p.strides[k][a]
			}
			if idx[a] < outer[a] {
				break
			}
			for k := range base {
				base[k] -= p.strides[k][a] * outer[a]
			}
			idx[a] = 0
		}
	}
}

// rowMajor returns the element strides of a contiguous row-major tensor of dims.
func rowMajor(dims []int) []int {
	s := make([]int, len(dims))
	n := 1
	for a := len(dims) - 1; a >= 0; a-- {
		s[a] = n
		n *= dims[a]
	}
	return s
}

// broadcastStrides returns the strides with which an operand of dims is read at the indices of a tensor of to
// (same rank; each of dims equal to to's or 1): 0 on the broadcast axes. ok is false for other shapes; an
// operand of one element broadcasts to any shape.
func broadcastStrides(dims, to []int) (s []int, ok bool) {
	size := 1
	for _, d := range dims {
		size *= d
	}
	if size == 1 {
		return make([]int, len(to)), true
	}
	if len(dims) != len(to) {
		return nil, false
	}
	s = rowMajor(dims)
	for a := range dims {
		switch dims[a] {
		case to[a]:
		case 1:
			s[a] = 0
		default:
			return nil, false
		}
	}
	return s, true
}

// minParallel is the number of elements below which an op runs on one core: splitting smaller work costs more
// in goroutine hand-offs than it saves.
const minParallel = 32 * 1024

// parallel calls fn on contiguous ranges covering [0, n), concurrently when the work (n items of cost each)
// is large enough, with at most GOMAXPROCS ranges. Each item is handled by exactly one call, so the results of
// per-item work do not depend on the split.
//
// While the crew's helpers are spinning (see crew), the ranges go to them: a goroutine started here would wait in
// the spawning core's run queue while a spinning helper holds the other core.
func parallel(n, cost int, fn func(lo, hi int)) {
	parts := min(runtime.GOMAXPROCS(0), n*cost/minParallel, n)
	if parts <= 1 {
		fn(0, n)
		return
	}
	if c := activeCrew(); c != nil && c.hot() && c.run(parts, func(u, _ int) { fn(u*n/parts, (u+1)*n/parts) }) {
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < parts; i++ {
		wg.Go(func() { fn(i*n/parts, (i+1)*n/parts) })
	}
	fn(0, n/parts)
	wg.Wait()
}

// row returns n elements of x from off with stride: x itself where the stride is 1, otherwise copied into
// *scratch (one value repeated for stride 0).
func row[T any](x []T, off, n, stride int, scratch *[]T) []T {
	if stride == 1 {
		return x[off : off+n]
	}
	if cap(*scratch) < n {
		*scratch = make([]T, n)
	}
	s := (*scratch)[:n]
	if stride == 0 {
		if f, ok := any(s).([]float32); ok {
			fill(f, any(x[off]).(float32))
			return s
		}
		v := x[off]
		for i := range s {
			s[i] = v
		}
		return s
	}
	for i := range s {
		s[i] = x[off+i*stride]
	}
	return s
}

// fill sets every element of o to v.
func fill(o []float32, v float32) {
	i := 0
	if haveAVX2 {
		i = len(o) &^ 7
		fillAVX2(o[:i], v)
	}
	for ; i < len(o); i++ {
		o[i] = v
	}
}
