package kernels

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// reduce returns the executor of ReduceSum or ReduceMax over the node's axes.
func reduce(op backends.OpType) executor {
	return func(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
		shape := *nodeShape(n)
		in, id, ok := float32s(inputs[0])
		axes, oka := nodeData(n).([]int)
		if !ok || !oka || len(axes) == 0 || shape.DType != dtypes.Float32 {
			return simplegoExec(op, b, n, inputs, owned)
		}
		// The output's stride on each operand axis: 0 on the reduced axes.
		outStrides := make([]int, len(id))
		reduced := make([]bool, len(id))
		for _, a := range axes {
			reduced[a] = true
		}
		stride := 1
		for a := len(id) - 1; a >= 0; a-- {
			if !reduced[a] {
				outStrides[a] = stride
				stride *= id[a]
			}
		}
		out, o, err := newFloat32(b, shape)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		if stride != len(o) {
			return nil, fmt.Errorf("%s: output of %d elements for a reduction to %d", op, len(o), stride)
		}
		rowFold, rowAcc, init := sumRow, addInto, float32(0)
		if op == backends.OpTypeReduceMax {
			rowFold, rowAcc, init = maxOfRow, maxInto, dtypes.Float32.LowestValue().(float32)
		}
		for i := range o {
			o[i] = init
		}
		p := makePlan(id, rowMajor(id), outStrides)
		// Work units write distinct outputs (and can run concurrently) when no outer axis is reduced and a row
		// folded into one output is not split.
		block := min(p.inner(), maxBlock)
		if p.stride(1) == 0 {
			block = p.inner()
		}
		run := func(lo, hi int) {
			if p.stride(1) == 0 { // reduce each row to one output element
				p.each(block, lo, hi, func(off []int, w int) { o[off[1]] = rowFold(o[off[1]], in[off[0]:off[0]+w]) })
			} else { // fold each row into a row of outputs
				p.each(block, lo, hi, func(off []int, w int) { rowAcc(o[off[1]:off[1]+w], in[off[0]:off[0]+w]) })
			}
		}
		independent := true
		for _, s := range p.strides[1][:len(p.dims)-1] {
			independent = independent && s != 0
		}
		if independent {
			parallel(p.units(block), block, run)
		} else {
			run(0, p.units(block))
		}
		return out, nil
	}
}

// sumRow returns acc plus the sum of x, added in interleaved partial sums (32 with AVX2, 4 without).
func sumRow(acc float32, x []float32) float32 {
	var s0, s1, s2, s3 float32
	if haveAVX2 {
		n := len(x) &^ 31
		s0 = sumAVX2(x[:n])
		x = x[n:]
	}
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i]
		s1 += x[i+1]
		s2 += x[i+2]
		s3 += x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return acc + ((s0 + s1) + (s2 + s3))
}

// maxOfRow returns the max of acc and x's elements (NaN if any is NaN, as Go's max), in four interleaved chains.
func maxOfRow(acc float32, x []float32) float32 {
	m0, m1, m2, m3 := acc, acc, acc, acc
	i := 0
	for ; i+4 <= len(x); i += 4 {
		m0 = max(m0, x[i])
		m1 = max(m1, x[i+1])
		m2 = max(m2, x[i+2])
		m3 = max(m3, x[i+3])
	}
	for ; i < len(x); i++ {
		m0 = max(m0, x[i])
	}
	return max(max(m0, m1), max(m2, m3))
}

func addInto(o, x []float32) { addRow(o, o, x) }

func maxInto(o, x []float32) {
	x = x[:len(o)]
	for i := range o {
		o[i] = max(o[i], x[i])
	}
}
