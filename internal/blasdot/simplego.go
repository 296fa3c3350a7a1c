package blasdot

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// simplego (v0.26.0) internals this package uses. The go.mod pins that version; checkLayout verifies the fields.

//go:linkname setNodeExecutor github.com/gomlx/gomlx/backends/simplego.setNodeExecutor
func setNodeExecutor(op backends.OpType, priority int, exec executor)

//go:linkname simplegoDotGeneral github.com/gomlx/gomlx/backends/simplego.execDotGeneral
func simplegoDotGeneral(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error)

//go:linkname getBufferForShape github.com/gomlx/gomlx/backends/simplego.(*Backend).getBufferForShape
func getBufferForShape(b *simplego.Backend, s shapes.Shape) *simplego.Buffer

// executor has the signature of simplego's nodeExecutor.
type executor func(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error)

// priorityUser is simplego's registerPriority for user overrides.
const priorityUser = 100

// MinWork is the smallest DotGeneral, in multiply-adds per batch element, that goes to OpenBLAS; smaller ones
// (a decoding step's attention, say) stay on simplego, where a call costs less.
const MinWork = 16 * 1024

var (
	installOnce sync.Once
	installed   *Lib
	installErr  error
)

// Install loads OpenBLAS and makes every simplego backend in this process run float32 DotGenerals of at least
// MinWork multiply-adds with cblas_sgemm. Other dtypes and smaller products keep simplego's own kernel.
// It returns the library in use, or why simplego's own matmul stays (OpenBLAS missing, or a GoMLX whose
// internals differ from the pinned version's).
func Install() (*Lib, error) {
	installOnce.Do(func() {
		lib, err := Load()
		if err != nil {
			installErr = err
			return
		}
		if err := checkLayout(); err != nil {
			installErr = fmt.Errorf("simplego internals changed, OpenBLAS not used: %w", err)
			return
		}
		installed = lib
		setNodeExecutor(backends.OpTypeDotGeneral, priorityUser, lib.dotGeneral)
	})
	return installed, installErr
}

// SetEnabled switches the float32 DotGenerals of every simplego backend in this process between OpenBLAS (on)
// and simplego's own kernel (off), for comparisons in one run; call it between executions. It reports whether
// OpenBLAS is installed (with it missing, simplego's kernel runs either way).
func SetEnabled(on bool) bool {
	lib, err := Install()
	if err != nil {
		return false
	}
	if on {
		setNodeExecutor(backends.OpTypeDotGeneral, priorityUser, lib.dotGeneral)
	} else {
		setNodeExecutor(backends.OpTypeDotGeneral, priorityUser, simplegoDotGeneral)
	}
	return true
}

// checkLayout verifies the unexported simplego fields that dotGeneral reads.
func checkLayout() error {
	want := []struct {
		t     reflect.Type
		field string
		kind  reflect.Kind
	}{
		{reflect.TypeFor[simplego.Node](), "data", reflect.Interface},
		{reflect.TypeFor[simplego.Buffer](), "flat", reflect.Interface},
		{reflect.TypeFor[simplego.Buffer](), "shape", reflect.Struct},
	}
	for _, w := range want {
		f, ok := w.t.FieldByName(w.field)
		if !ok || f.Type.Kind() != w.kind {
			return fmt.Errorf("%s.%s: not a field of kind %s", w.t, w.field, w.kind)
		}
	}
	if f, _ := reflect.TypeFor[simplego.Buffer]().FieldByName("shape"); f.Type != reflect.TypeFor[shapes.Shape]() {
		return fmt.Errorf("simplego.Buffer.shape is %s, not shapes.Shape", f.Type)
	}
	return nil
}

// dotParams are the fields of simplego's dotGeneralNodeData that a matmul needs.
type dotParams struct {
	lhsContract, lhsBatch, rhsContract, rhsBatch []int
	batch, lhsCross, rhsCross, contract          int
}

func readParams(n *simplego.Node) (p dotParams, err error) {
	d := reflect.ValueOf(n).Elem().FieldByName("data")
	if d.IsNil() {
		return p, fmt.Errorf("DotGeneral node without data")
	}
	d = d.Elem()
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

// float32s returns a float32 buffer's data and dimensions (ok false for other dtypes).
func float32s(b *simplego.Buffer) (data []float32, dims []int, ok bool) {
	v := reflect.ValueOf(b).Elem()
	flat := v.FieldByName("flat").Elem()
	if flat.Kind() != reflect.Slice || flat.Type().Elem().Kind() != reflect.Float32 {
		return nil, nil, false
	}
	sh := v.FieldByName("shape")
	if dtypes.DType(sh.FieldByName("DType").Int()) != dtypes.Float32 {
		return nil, nil, false
	}
	ds := sh.FieldByName("Dimensions")
	dims = make([]int, ds.Len())
	for i := range dims {
		dims[i] = int(ds.Index(i).Int())
	}
	if flat.Len() == 0 {
		return []float32{}, dims, true
	}
	return unsafe.Slice((*float32)(flat.UnsafePointer()), flat.Len()), dims, true
}

// dotGeneral is the simplego executor: output [batch, lhsCross, rhsCross] = Σ_contract lhs·rhs, per batch one
// cblas_sgemm on the operands as they lie in memory (transposed flags), or after one transposition into
// [batch, cross, contract] when their axes are interleaved.
func (l *Lib) dotGeneral(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	lhs, lhsDims, ok1 := float32s(inputs[0])
	rhs, rhsDims, ok2 := float32s(inputs[1])
	if !ok1 || !ok2 {
		return simplegoDotGeneral(b, n, inputs, owned)
	}
	p, err := readParams(n)
	if err != nil || p.lhsCross*p.rhsCross*p.contract < MinWork ||
		len(lhs) != p.batch*p.lhsCross*p.contract || len(rhs) != p.batch*p.rhsCross*p.contract {
		return simplegoDotGeneral(b, n, inputs, owned)
	}
	out := getBufferForShape(b, shapes.Make(dtypes.Float32, p.batch, p.lhsCross, p.rhsCross))
	if out == nil {
		return nil, fmt.Errorf("DotGeneral: backend finalized")
	}
	c, _, _ := float32s(out)
	a, aCrossFirst := operand(lhs, lhsDims, p.lhsBatch, p.lhsContract)
	bm, bCrossFirst := operand(rhs, rhsDims, p.rhsBatch, p.rhsContract)
	m, nn, k := p.lhsCross, p.rhsCross, p.contract
	lda, ldb := m, nn
	if aCrossFirst {
		lda = k
	}
	if bCrossFirst {
		ldb = k
	}
	l.calls.Add(1)
	for i := range p.batch {
		l.Sgemm(!aCrossFirst, bCrossFirst, m, nn, k, a[i*m*k:(i+1)*m*k], lda, bm[i*nn*k:(i+1)*nn*k], ldb, c[i*m*nn:(i+1)*m*nn])
	}
	return out, nil
}

// operand returns x laid out as [batch, cross, contract] (crossFirst) or [batch, contract, cross], transposing
// it only when its axes are in neither order.
func operand(x []float32, dims, batchAxes, contractAxes []int) (data []float32, crossFirst bool) {
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
		return x, true
	}
	if isIdentity(concat(batchAxes, contractAxes, cross)) {
		return x, false
	}
	return transpose(x, dims, crossFirstPerm), true
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
