package kernels

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
)

// scatterParams are the fields of simplego's scatterNode that a row scatter needs.
type scatterParams struct {
	indexVectorAxis                                                int
	updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int
}

func readScatterParams(n *simplego.Node) (p scatterParams, err error) {
	d := reflect.ValueOf(nodeData(n))
	if d.Kind() == reflect.Pointer {
		d = d.Elem()
	}
	if d.Kind() != reflect.Struct {
		return p, fmt.Errorf("scatter node data is a %s", d.Kind())
	}
	f := d.FieldByName("indexVectorAxis")
	if f.Kind() != reflect.Int {
		return p, fmt.Errorf("scatterNode.indexVectorAxis missing")
	}
	p.indexVectorAxis = int(f.Int())
	for _, s := range []struct {
		dst  *[]int
		name string
	}{{&p.updateWindowAxes, "updateWindowAxes"}, {&p.insertedWindowAxes, "insertedWindowAxes"}, {&p.scatterAxesToOperandAxes, "scatterAxesToOperandAxes"}} {
		f := d.FieldByName(s.name)
		if f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Int {
			return p, fmt.Errorf("scatterNode.%s missing", s.name)
		}
		*s.dst = make([]int, f.Len())
		for i := range *s.dst {
			(*s.dst)[i] = int(f.Index(i).Int())
		}
	}
	return p, nil
}

// rowScatter reports whether p scatters whole rows: indices [N, R-1] (the index vector last) address the
// leading R-1 axes of a rank-R operand in order, and updates [N, row] each fill one row of its last axis.
func (p scatterParams) rowScatter(operand, indices, updates []int) bool {
	r := len(operand)
	if r < 2 || len(indices) != 2 || len(updates) != 2 || p.indexVectorAxis != 1 || indices[1] != r-1 ||
		updates[0] != indices[0] || updates[1] != operand[r-1] || !slices.Equal(p.updateWindowAxes, []int{1}) {
		return false
	}
	lead := make([]int, r-1)
	for i := range lead {
		lead[i] = i
	}
	return slices.Equal(p.insertedWindowAxes, lead) && slices.Equal(p.scatterAxesToOperandAxes, lead)
}

// execScatterSum is ScatterSum for the row scatter a KV-cache write is (rowScatter): each update row is added to
// the operand row its index vector names, in place when the operand is the op's to take. Anything else, and
// any index out of bounds (checked before anything is written), goes to simplego.
func execScatterSum(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	const op = backends.OpTypeScatterSum
	operand, od, ok1 := float32s(inputs[0])
	updates, ud, ok2 := float32s(inputs[2])
	if !ok1 || !ok2 || inputs[1] == nil {
		return simplegoExec(op, b, n, inputs, owned)
	}
	p, err := readScatterParams(n)
	is := bufShape(inputs[1])
	if err != nil || !p.rowScatter(od, is.Dimensions, ud) {
		return simplegoExec(op, b, n, inputs, owned)
	}
	rows, width := ud[0], ud[1]
	offsets := make([]int, rows)
	inBounds := false
	switch idx := bufFlat(inputs[1]).(type) {
	case []int32:
		inBounds = rowOffsets(idx, od, offsets)
	case []int64:
		inBounds = rowOffsets(idx, od, offsets)
	}
	if !inBounds {
		return simplegoExec(op, b, n, inputs, owned)
	}
	out, o := inputs[0], operand
	if owned[0] {
		inputs[0] = nil
	} else {
		if out, o, err = newFloat32(b, *bufShape(inputs[0])); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		copy(o, operand)
	}
	for i, off := range offsets {
		addRow(o[off:off+width], o[off:off+width], updates[i*width:(i+1)*width])
	}
	return out, nil
}

// rowOffsets fills offsets with the flat offset of the operand row each index vector of idx ([N, len(dims)-1])
// names, reporting false when idx has another length or an index is out of bounds.
func rowOffsets[T int32 | int64](idx []T, dims []int, offsets []int) bool {
	r := len(dims) - 1
	if len(idx) != len(offsets)*r {
		return false
	}
	for n := range offsets {
		off := 0
		for a, v := range idx[n*r : (n+1)*r] {
			if v < 0 || int(v) >= dims[a] {
				return false
			}
			off = off*dims[a] + int(v)
		}
		offsets[n] = off * dims[r]
	}
	return true
}
