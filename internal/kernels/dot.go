package kernels

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// MinWork is the smallest DotGeneral, in multiply-adds per batch element, that goes to OpenBLAS; smaller ones
// (a decoding step's attention, say) stay on simplego, where a call costs less.
const MinWork = 16 * 1024

// dotParams are the fields of simplego's dotGeneralNodeData that a matmul needs.
type dotParams struct {
	lhsContract, lhsBatch, rhsContract, rhsBatch []int
	batch, lhsCross, rhsCross, contract          int
	// How each operand is laid out (operandLayout), for the node's input shapes.
	lhs, rhs form
}

// form is an operandLayout: in place as [batch, cross, contract] (crossFirst), in place as [batch, contract,
// cross], or copied through perm into [batch, cross, contract].
type form struct {
	perm               []int
	crossFirst, copied bool
}

func readParams(n *simplego.Node) (p dotParams, err error) {
	data := nodeData(n)
	if data == nil {
		return p, fmt.Errorf("DotGeneral node without data")
	}
	d := reflect.ValueOf(data)
	if d.Kind() == reflect.Pointer {
		d = d.Elem()
	}
	if d.Kind() != reflect.Struct {
		return p, fmt.Errorf("DotGeneral node data is a %s", d.Kind())
	}
	ints := func(name string) ([]int, error) {
		f := d.FieldByName(name)
		if f.Kind() != reflect.Slice {
			return nil, fmt.Errorf("dotGeneralNodeData.%s missing", name)
		}
		s := make([]int, f.Len())
		for i := range s {
			s[i] = int(f.Index(i).Int())
		}
		return s, nil
	}
	num := func(name string) (int, error) {
		f := d.FieldByName(name)
		if f.Kind() != reflect.Int {
			return 0, fmt.Errorf("dotGeneralNodeData.%s missing", name)
		}
		return int(f.Int()), nil
	}
	for _, s := range []struct {
		dst  *[]int
		name string
	}{{&p.lhsContract, "lhsContractingAxes"}, {&p.lhsBatch, "lhsBatchAxes"}, {&p.rhsContract, "rhsContractingAxes"}, {&p.rhsBatch, "rhsBatchAxes"}} {
		if *s.dst, err = ints(s.name); err != nil {
			return p, err
		}
	}
	for _, s := range []struct {
		dst  *int
		name string
	}{{&p.batch, "batchSize"}, {&p.lhsCross, "lhsCrossSize"}, {&p.rhsCross, "rhsCrossSize"}, {&p.contract, "contractingSize"}} {
		if *s.dst, err = num(s.name); err != nil {
			return p, err
		}
	}
	return p, nil
}

// maxCachedParams bounds the DotGeneral nodes whose axes are cached: far more than the DotGenerals of the
// graphs a run keeps compiled (a Qwen2 layer has seven), so that a decoding step finds them all, while a
// process that compiles graph after graph (a new shape bucket, a test) does not keep every one alive.
const maxCachedParams = 4096

// paramsCache maps *simplego.Node to its dotParams. When full it is emptied: the graphs still in use fill
// it again at the cost of one reflective read per node.
type paramsCache struct {
	mu sync.Mutex
	m  map[*simplego.Node]dotParams
}

// params returns readParams(n), read once per node while cached: a compiled graph runs its nodes many times
// (a decoding step runs every token), and reflection costs microseconds per call.
func (l *Lib) params(n *simplego.Node, lhsDims, rhsDims []int) (dotParams, error) {
	c := &l.paramsOf
	c.mu.Lock()
	p, ok := c.m[n]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := readParams(n)
	if err != nil {
		return p, err
	}
	p.lhs.perm, p.lhs.crossFirst, p.lhs.copied = operandLayout(lhsDims, p.lhsBatch, p.lhsContract)
	p.rhs.perm, p.rhs.crossFirst, p.rhs.copied = operandLayout(rhsDims, p.rhsBatch, p.rhsContract)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedParams {
		c.m = make(map[*simplego.Node]dotParams)
	}
	c.m[n] = p
	c.mu.Unlock()
	return p, nil
}

// dotGeneral is the simplego executor: output [batch, lhsCross, rhsCross] = Σ_contract lhs·rhs, per batch one
// cblas_sgemm on the operands as they lie in memory (transposed flags), or after one transposition into
// [batch, cross, contract] when their axes are interleaved.
func (l *Lib) dotGeneral(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	lhs, lhsDims, ok1 := float32s(inputs[0])
	rhs, rhsDims, ok2 := float32s(inputs[1])
	if !ok1 || !ok2 {
		return simplegos[backends.OpTypeDotGeneral](b, n, inputs, owned)
	}
	p, err := l.params(n, lhsDims, rhsDims)
	if err != nil || len(lhs) != p.batch*p.lhsCross*p.contract || len(rhs) != p.batch*p.rhsCross*p.contract {
		return simplegos[backends.OpTypeDotGeneral](b, n, inputs, owned)
	}
	m, nn, k := p.lhsCross, p.rhsCross, p.contract
	aFirst, bFirst := p.lhs.crossFirst, p.rhs.crossFirst
	small := l.small.Load() && smallOK(m, k, aFirst, bFirst)
	if !small && m*nn*k < MinWork {
		return simplegos[backends.OpTypeDotGeneral](b, n, inputs, owned)
	}
	out, c, err := newFloat32(b, shapes.Make(dtypes.Float32, p.batch, p.lhsCross, p.rhsCross))
	if err != nil {
		return nil, fmt.Errorf("DotGeneral: %w", err)
	}
	a, aCrossFirst := operand(lhs, lhsDims, p.lhs)
	bm, bCrossFirst := operand(rhs, rhsDims, p.rhs)
	if small {
		l.smallCalls.Add(1)
		l.smallDots(p.batch, m, nn, k, a, bm, bCrossFirst, c)
		return out, nil
	}
	lda, ldb := m, nn
	if aCrossFirst {
		lda = k
	}
	if bCrossFirst {
		ldb = k
	}
	l.calls.Add(1)
	// OpenBLAS runs single-threaded (see Load): the batch is split across cores here, and where there are fewer
	// batch elements than cores, each product is split too, by its longer side (decoding multiplies 8 rows by
	// hundreds of columns).
	parts := max(1, runtime.GOMAXPROCS(0)/p.batch)
	byRows := m >= nn
	side := nn
	if byRows {
		side = m
	}
	parallel(p.batch*parts, m*nn*k/parts/sgemmCost, func(lo, hi int) {
		for u := lo; u < hi; u++ {
			i, j := u/parts, u%parts
			s0, s1 := j*side/parts, (j+1)*side/parts
			if s0 == s1 {
				continue
			}
			ai, bi, ci := a[i*m*k:(i+1)*m*k], bm[i*nn*k:(i+1)*nn*k], c[i*m*nn:(i+1)*m*nn]
			if byRows { // rows s0..s1 of a and c
				if aCrossFirst {
					ai = ai[s0*k:]
				} else {
					ai = ai[s0:]
				}
				l.sgemmLD(!aCrossFirst, bCrossFirst, s1-s0, nn, k, ai, lda, bi, ldb, ci[s0*nn:], nn)
			} else { // columns s0..s1 of b and c
				if bCrossFirst {
					bi = bi[s0*k:]
				} else {
					bi = bi[s0:]
				}
				l.sgemmLD(!aCrossFirst, bCrossFirst, m, s1-s0, k, ai, lda, bi, ldb, ci[s0:], nn)
			}
		}
	})
	return out, nil
}

// smallDots runs a batch of small products (see smallDot) split across cores: by batch element, or by blocks
// of columns when there are fewer batch elements than cores.
func (l *Lib) smallDots(batch, m, n, k int, a, b []float32, bCrossFirst bool, c []float32) {
	align := smallAlign(bCrossFirst)
	blocks := max(1, n/align)
	crew := l.crew()
	parts := max(1, runtime.GOMAXPROCS(0)/batch)
	if crew != nil && batch*m*n*k >= crewWork {
		parts = (crewUnits + batch - 1) / batch
	}
	parts = min(parts, blocks)
	body := func(lo, hi int) {
		var scratch []float32
		for u := lo; u < hi; u++ {
			i, j := u/parts, u%parts
			n0, n1 := j*blocks/parts*align, (j+1)*blocks/parts*align
			if j == parts-1 {
				n1 = n
			}
			smallDot(m, n, k, a[i*m*k:(i+1)*m*k], b[i*n*k:(i+1)*n*k], bCrossFirst, c[i*m*n:(i+1)*m*n], n0, n1, &scratch)
		}
	}
	if crew != nil && batch*m*n*k >= crewWork && crew.run(batch*parts, body) {
		l.crewCalls.Add(1)
		return
	}
	parallel(batch*parts, m*n*k/parts/smallCost, body)
}

// crewWork is the fewest multiply-adds of a small product shared with the crew (a decoding step's k and v
// projections for 8 sequences have 262K), and crewUnits the fewest units it is cut into: a few per core, so that
// a helper that joins late still takes a share.
const (
	crewWork  = 64 * 1024
	crewUnits = 8
)

// sgemmCost scales an OpenBLAS product's multiply-adds to parallel's per-element cost: products of more than
// 4M multiply-adds (about 40 µs on one core) are split across cores, where waking the other core's thread pays.
// Below that (a decoding step's rotary products, 32 rows by 64 x 64) the split cost more than the product:
// 53 µs for a 32 x 64 x 64 product split in two.
const sgemmCost = 64

// smallCost scales a small product's multiply-adds to parallel's per-element cost so that only products of
// more than 16M multiply-adds (a 49K-id lm_head for 8 sequences, say) are split across cores. Handing half a
// product to another core wakes that core's thread, tens of microseconds when it sleeps, about what the
// tiny default's decoding products take whole: splitting those above a quarter of a million multiply-adds made
// its decoding 10% slower (BenchmarkDecode, 3,151-3,222 against 3,546-3,626 tokens/s unsplit, alternating in
// one run).
const smallCost = 256

// operand returns x laid out as [batch, cross, contract] (crossFirst) or [batch, contract, cross], as f says,
// transposing it only when its axes are in neither order.
func operand(x []float32, dims []int, f form) (data []float32, crossFirst bool) {
	if f.copied {
		return transpose(x, dims, f.perm), true
	}
	return x, f.crossFirst
}

// operandLayout says how operand lays out an operand of dims: in place as [batch, cross, contract]
// (crossFirst), in place as [batch, contract, cross], or copied through perm into [batch, cross, contract].
func operandLayout(dims, batchAxes, contractAxes []int) (perm []int, crossFirst, copied bool) {
	role := make([]int, len(dims)) // 0 cross, 1 contracting, 2 batch
	for _, a := range contractAxes {
		role[a] = 1
	}
	for _, a := range batchAxes {
		role[a] = 2
	}
	var cross []int
	for a, r := range role {
		if r == 0 {
			cross = append(cross, a)
		}
	}
	crossFirstPerm := concat(batchAxes, cross, contractAxes)
	if isIdentity(crossFirstPerm) {
		return nil, true, false
	}
	if isIdentity(concat(batchAxes, contractAxes, cross)) {
		return nil, false, false
	}
	return crossFirstPerm, true, true
}

func concat(parts ...[]int) []int {
	var s []int
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

func isIdentity(perm []int) bool {
	for i, p := range perm {
		if p != i {
			return false
		}
	}
	return true
}

// transpose returns x (row-major, dims) with its axes permuted: output axis i is input axis perm[i].
func transpose(x []float32, dims, perm []int) []float32 {
	rank := len(dims)
	out := make([]float32, len(x))
	if rank == 0 || len(x) == 0 {
		copy(out, x)
		return out
	}
	inStride := make([]int, rank)
	s := 1
	for a := rank - 1; a >= 0; a-- {
		inStride[a] = s
		s *= dims[a]
	}
	outDims := make([]int, rank)
	stride := make([]int, rank) // input stride of each output axis
	for i, a := range perm {
		outDims[i] = dims[a]
		stride[i] = inStride[a]
	}
	inner, innerStride := outDims[rank-1], stride[rank-1]
	idx := make([]int, rank)
	off := 0
	for o := 0; o < len(out); o += inner {
		row := out[o : o+inner]
		for j := range row {
			row[j] = x[off+j*innerStride]
		}
		for a := rank - 2; a >= 0; a-- {
			idx[a]++
			off += stride[a]
			if idx[a] < outDims[a] {
				break
			}
			off -= stride[a] * outDims[a]
			idx[a] = 0
		}
	}
	return out
}
