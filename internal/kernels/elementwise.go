package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// goKernelTable is the executor of every op this package's Go kernels run.
func goKernelTable() map[backends.OpType]executor {
	return map[backends.OpType]executor{
		backends.OpTypeAdd:            binary(backends.OpTypeAdd, addRow),
		backends.OpTypeSub:            binary(backends.OpTypeSub, subRow),
		backends.OpTypeMul:            binary(backends.OpTypeMul, mulRow),
		backends.OpTypeDiv:            binary(backends.OpTypeDiv, divRow),
		backends.OpTypeMax:            binary(backends.OpTypeMax, maxRow),
		backends.OpTypeMin:            binary(backends.OpTypeMin, minRow),
		backends.OpTypeExp:            unary(backends.OpTypeExp, expRow),
		backends.OpTypeLogistic:       unary(backends.OpTypeLogistic, logisticRow),
		backends.OpTypeWhere:          execWhere,
		backends.OpTypeBroadcastInDim: execBroadcastInDim,
		backends.OpTypeTranspose:      execTranspose,
		backends.OpTypeReduceSum:      reduce(backends.OpTypeReduceSum),
		backends.OpTypeReduceMax:      reduce(backends.OpTypeReduceMax),
		backends.OpTypeScatterSum:     execScatterSum,
	}
}

// binary returns the executor of an elementwise binary op with implicit broadcasting (operands of the output's
// rank with some axes of size 1, or of one element), whose kernel computes o[i] = a[i] op b[i] on rows.
func binary(op backends.OpType, kernel func(o, a, b []float32)) executor {
	return func(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
		shape := *nodeShape(n)
		lhs, ld, ok1 := float32s(inputs[0])
		rhs, rd, ok2 := float32s(inputs[1])
		if !ok1 || !ok2 || shape.DType != dtypes.Float32 {
			return simplegoExec(op, b, n, inputs, owned)
		}
		dims := shape.Dimensions
		ls, ok1 := broadcastStrides(ld, dims)
		rs, ok2 := broadcastStrides(rd, dims)
		if !ok1 || !ok2 {
			return simplegoExec(op, b, n, inputs, owned)
		}
		out, o, err := outputFor(b, shape, inputs, owned, 1, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		p := makePlan(dims, rowMajor(dims), ls, rs)
		block, as, bs := min(p.inner(), maxBlock), p.stride(1), p.stride(2)
		parallel(p.units(block), block, func(lo, hi int) {
			var ta, tb []float32
			p.each(block, lo, hi, func(off []int, w int) {
				kernel(o[off[0]:off[0]+w], row(lhs, off[1], w, as, &ta), row(rhs, off[2], w, bs, &tb))
			})
		})
		return out, nil
	}
}

func addRow(o, a, b []float32) {
	a, b = a[:len(o)], b[:len(o)]
	i := 0
	if haveAVX2 {
		i = len(o) &^ 7
		addAVX2(o[:i], a[:i], b[:i])
	}
	for ; i < len(o); i++ {
		o[i] = a[i] + b[i]
	}
}

func subRow(o, a, b []float32) {
	a, b = a[:len(o)], b[:len(o)]
	i := 0
	if haveAVX2 {
		i = len(o) &^ 7
		subAVX2(o[:i], a[:i], b[:i])
	}
	for ; i < len(o); i++ {
		o[i] = a[i] - b[i]
	}
}

func mulRow(o, a, b []float32) {
	a, b = a[:len(o)], b[:len(o)]
	i := 0
	if haveAVX2 {
		i = len(o) &^ 7
		mulAVX2(o[:i], a[:i], b[:i])
	}
	for ; i < len(o); i++ {
		o[i] = a[i] * b[i]
	}
}

func divRow(o, a, b []float32) {
	a, b = a[:len(o)], b[:len(o)]
	i := 0
	if haveAVX2 {
		i = len(o) &^ 7
		divAVX2(o[:i], a[:i], b[:i])
	}
	for ; i < len(o); i++ {
		o[i] = a[i] / b[i]
	}
}

func maxRow(o, a, b []float32) {
	a, b = a[:len(o)], b[:len(o)]
	for i := range o {
		o[i] = max(a[i], b[i])
	}
}

func minRow(o, a, b []float32) {
	a, b = a[:len(o)], b[:len(o)]
	for i := range o {
		o[i] = min(a[i], b[i])
	}
}

// outputFor returns the buffer an elementwise op writes its float32 output of shape into: the first of the
// inputs at candidates (in order) that the op owns and that has the output's shape, taken over (its inputs entry
// set to nil, as simplego expects), or else a new buffer.
func outputFor(b *simplego.Backend, shape shapes.Shape, inputs []*simplego.Buffer, owned []bool, candidates ...int) (*simplego.Buffer, []float32, error) {
	for _, i := range candidates {
		if !owned[i] {
			continue
		}
		if data, dims, ok := float32s(inputs[i]); ok && slices.Equal(dims, shape.Dimensions) {
			out := inputs[i]
			inputs[i] = nil
			return out, data, nil
		}
	}
	return newFloat32(b, shape)
}

// unary returns the executor of an elementwise unary op whose kernel computes o[i] = f(a[i]), in place when
// the input is the op's to take.
func unary(op backends.OpType, kernel func(o, a []float32)) executor {
	return func(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
		in, _, ok := float32s(inputs[0])
		if !ok {
			return simplegoExec(op, b, n, inputs, owned)
		}
		out, o := inputs[0], in
		if owned[0] {
			inputs[0] = nil
		} else {
			var err error
			if out, o, err = newFloat32(b, *bufShape(inputs[0])); err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
		}
		parallel(len(in), 8, func(lo, hi int) { kernel(o[lo:hi], in[lo:hi]) })
		return out, nil
	}
}

// expRow sets o[i] = e^a[i]; o may be a.
// Exp sets o[i] = e^a[i] for float32 rows outside a graph (a sampler's softmax), on the kernels Exp runs in
// graphs: AVX2 where the CPU has it, within 2 ulp of math.Exp; o may be a.
func Exp(o, a []float32) { expRow(o, a) }

func expRow(o, a []float32) {
	a = a[:len(o)]
	i := 0
	if haveAVX2 {
		i = len(a) &^ 7
		expAVX2(o[:i], a[:i])
	}
	for ; i < len(o); i++ {
		o[i] = exp32(a[i])
	}
}

// logisticRow sets o[i] = 1/(1+e^-a[i]), computed from e = e^-|a| as 1/(1+e) or e/(1+e) so that neither form
// overflows; o may be a.
func logisticRow(o, a []float32) {
	a = a[:len(o)]
	if haveAVX2 {
		n := len(o) &^ 7
		logisticAVX2(o[:n], a[:n])
		o, a = o[n:], a[n:]
	}
	for i, x := range a {
		e := exp32(-abs32(x))
		if x >= 0 {
			o[i] = 1 / (1 + e)
		} else {
			o[i] = e / (1 + e)
		}
	}
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// execWhere selects onTrue where the (boolean) condition holds and onFalse elsewhere, each operand broadcast
// to the output's shape.
func execWhere(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	shape := *nodeShape(n)
	cond, okc := bufFlat(inputs[0]).([]bool)
	onTrue, td, ok1 := float32s(inputs[1])
	onFalse, fd, ok2 := float32s(inputs[2])
	if !okc || !ok1 || !ok2 || shape.DType != dtypes.Float32 {
		return simplegoExec(backends.OpTypeWhere, b, n, inputs, owned)
	}
	dims := shape.Dimensions
	cs, okc := broadcastStrides(bufShape(inputs[0]).Dimensions, dims)
	ts, ok1 := broadcastStrides(td, dims)
	fs, ok2 := broadcastStrides(fd, dims)
	if !okc || !ok1 || !ok2 {
		return simplegoExec(backends.OpTypeWhere, b, n, inputs, owned)
	}
	out, o, err := outputFor(b, shape, inputs, owned, 1, 2)
	if err != nil {
		return nil, fmt.Errorf("Where: %w", err)
	}
	p := makePlan(dims, rowMajor(dims), cs, ts, fs)
	block := min(p.inner(), maxBlock)
	parallel(p.units(block), block, func(lo, hi int) {
		var sc []bool
		var st, sf []float32
		p.each(block, lo, hi, func(off []int, w int) {
			c := row(cond, off[1], w, p.stride(1), &sc)
			t := row(onTrue, off[2], w, p.stride(2), &st)
			f := row(onFalse, off[3], w, p.stride(3), &sf)
			r := o[off[0] : off[0]+w]
			for i := range r {
				if c[i] {
					r[i] = t[i]
				} else {
					r[i] = f[i]
				}
			}
		})
	})
	return out, nil
}

// execBroadcastInDim copies the operand into the output, operand axis i becoming output axis axes[i] and the
// other output axes repeating it.
func execBroadcastInDim(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	id := bufShape(inputs[0]).Dimensions
	axes, ok := nodeData(n).([]int)
	if !ok || len(axes) != len(id) {
		return simplegoExec(backends.OpTypeBroadcastInDim, b, n, inputs, owned)
	}
	dims := nodeShape(n).Dimensions
	s := make([]int, len(dims))
	inStrides := rowMajor(id)
	for i, a := range axes {
		if id[i] != 1 {
			s[a] = inStrides[i]
		}
	}
	return copyOp(backends.OpTypeBroadcastInDim, b, n, inputs, owned, s)
}

// execTranspose permutes the operand's axes: output axis i is operand axis perm[i].
func execTranspose(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	id := bufShape(inputs[0]).Dimensions
	perm, ok := nodeData(n).([]int)
	if !ok || len(perm) != len(id) {
		return simplegoExec(backends.OpTypeTranspose, b, n, inputs, owned)
	}
	inStrides := rowMajor(id)
	s := make([]int, len(perm))
	for i, a := range perm {
		s[i] = inStrides[a]
	}
	return copyOp(backends.OpTypeTranspose, b, n, inputs, owned, s)
}

// copyOp fills a new buffer of the node's shape with the operand read at strides s per output axis, for the
// dtypes the model's layout ops move (float32 values, boolean masks).
func copyOp(op backends.OpType, b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool, s []int) (*simplego.Buffer, error) {
	shape := *nodeShape(n)
	if bufShape(inputs[0]).DType != shape.DType {
		return simplegoExec(op, b, n, inputs, owned)
	}
	switch x := bufFlat(inputs[0]).(type) {
	case []float32:
		return copyInto(op, b, shape, x, s)
	case []bool:
		return copyInto(op, b, shape, x, s)
	}
	return simplegoExec(op, b, n, inputs, owned)
}

func copyInto[T any](op backends.OpType, b *simplego.Backend, shape shapes.Shape, x []T, s []int) (*simplego.Buffer, error) {
	out := getBufferForShape(b, shape)
	if out == nil {
		return nil, fmt.Errorf("%s: backend finalized", op)
	}
	o, ok := bufFlat(out).([]T)
	if !ok || len(o) != shape.Size() {
		return nil, fmt.Errorf("%s: buffer for %s holds %T", op, shape, bufFlat(out))
	}
	copyStrided(o, x, shape.Dimensions, s)
	return out, nil
}

// copyStrided fills o (row-major, dims) with x read at strides s per axis.
func copyStrided[T any](o, x []T, dims, s []int) {
	p := makePlan(dims, rowMajor(dims), s)
	block, xs := min(p.inner(), maxBlock), p.stride(1)
	parallel(p.units(block), block, func(lo, hi int) {
		p.each(block, lo, hi, func(off []int, w int) {
			r := o[off[0] : off[0]+w]
			switch xs {
			case 1:
				copy(r, x[off[1]:off[1]+w])
			case 0:
				if f, ok := any(r).([]float32); ok {
					fill(f, any(x[off[1]]).(float32))
					break
				}
				v := x[off[1]]
				for i := range r {
					r[i] = v
				}
			default:
				j := off[1]
				for i := range r {
					r[i] = x[j]
					j += xs
				}
			}
		})
	})
}
