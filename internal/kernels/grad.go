package kernels

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26's DotGeneral gradient multiplies broadcast operands and reduces, materializing a tensor of
// [batch x lhs-cross x rhs-cross x contracting] elements: for one 2048x256 by 256x2048 matmul that is 1G floats, so
// training steps ran out of memory. InstallDotGradient replaces it, in GoMLX's VJP registry, with the textbook
// gradient made of two DotGenerals (dL/dlhs = v . rhs, dL/drhs = v . lhs over the other operand's cross axes),
// so that the model's graphs use plain DotGeneral. The registry is per process; the replacement computes the
// same values as GoMLX's own (TestDotGradient), so other GoMLX graphs in the process are unaffected but faster.
// An earlier version wrapped every matmul in custom-gradient identities tied to the output by a zero-weighted
// sum; those identities, sums and zero gradients cost about a third of a training step.

var (
	dotGradientOnce sync.Once
	dotGradientMu   sync.Mutex // guards the two below for DotGradientEngine
	dotGradientDone bool
	dotGradientErr  error
	// gomlxDotGradient is GoMLX's own DotGeneral VJP, kept for tests.
	gomlxDotGradient graph.VJP
)

// InstallDotGradient installs dotGeneralVJP for DotGeneral nodes, once per process (backend builds a probe
// graph). On any GoMLX but PinnedGoMLX, or when GoMLX's DotGeneral node no longer carries its axes where dotAxes
// reads them, it leaves GoMLX's own gradient in place and says why; DotGradientEngine reports it.
func InstallDotGradient(backend backends.Backend) error {
	dotGradientOnce.Do(func() {
		dotGradientMu.Lock()
		defer func() { dotGradientDone = true; dotGradientMu.Unlock() }()
		if err := checkVersion(); err != nil {
			dotGradientErr = fmt.Errorf("GoMLX's DotGeneral gradient kept: %w", err)
			return
		}
		g := graph.NewGraph(backend, "probe")
		defer g.Finalize()
		if _, err := dotAxes(graph.DotGeneral(graph.Parameter(g, "a", shapes.Make(dtypes.Float32, 2, 3)), []int{1}, nil,
			graph.Parameter(g, "b", shapes.Make(dtypes.Float32, 3, 4)), []int{0}, nil)); err != nil {
			dotGradientErr = fmt.Errorf("GoMLX's DotGeneral gradient kept: %w", err)
			return
		}
		gomlxDotGradient = graph.VJPRegistration[graph.NodeTypeDotGeneral]
		graph.VJPRegistration[graph.NodeTypeDotGeneral] = dotGeneralVJP
	})
	return dotGradientErr
}

// nodeAxes are a DotGeneral graph node's contracting and batch axes.
type nodeAxes struct{ lc, lb, rc, rb []int }

// dotAxes reads a DotGeneral node's axes from GoMLX's (unexported) node inputs.
func dotAxes(n *graph.Node) (p nodeAxes, err error) {
	in := reflect.ValueOf(n).Elem().FieldByName("inputs")
	if !in.IsValid() || in.Kind() != reflect.Interface || in.IsNil() || in.Elem().Kind() != reflect.Pointer {
		return p, fmt.Errorf("DotGeneral node has no inputs struct")
	}
	st := in.Elem().Elem()
	ints := func(name string) ([]int, error) {
		f := st.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Int {
			return nil, fmt.Errorf("DotGeneral inputs have no %s", name)
		}
		out := make([]int, f.Len())
		for i := range out {
			out[i] = int(f.Index(i).Int())
		}
		return out, nil
	}
	for _, f := range []struct {
		dst  *[]int
		name string
	}{{&p.lc, "lhsContractingAxes"}, {&p.lb, "lhsBatchAxes"}, {&p.rc, "rhsContractingAxes"}, {&p.rb, "rhsBatchAxes"}} {
		if *f.dst, err = ints(f.name); err != nil {
			return p, err
		}
	}
	return p, nil
}

// dotGeneralVJP returns dL/dlhs and dL/drhs of y = DotGeneral(lhs, rhs) for v = dL/dy, whose axes are
// [batch..., lhs cross..., rhs cross...].
func dotGeneralVJP(node *graph.Node, vs []*graph.Node, _ shapes.Shape) []*graph.Node {
	p, err := dotAxes(node)
	if err != nil {
		panic(err) // InstallDotGradient checked the layout
	}
	v := vs[0]
	lhs, rhs := node.Inputs()[0], node.Inputs()[1]
	lhsCross := crossAxes(lhs.Rank(), p.lc, p.lb)
	rhsCross := crossAxes(rhs.Rank(), p.rc, p.rb)
	nb, nlc, nrc := len(p.lb), len(lhsCross), len(rhsCross)
	// v . rhs over rhs's cross axes -> [batch, lhs cross, rhs's contracting axes in order]; likewise for rhs.
	dl := graph.DotGeneral(v, iotaFrom(nb+nlc, nrc), iotaFrom(0, nb), rhs, rhsCross, p.rb)
	dr := graph.DotGeneral(v, iotaFrom(nb, nlc), iotaFrom(0, nb), lhs, lhsCross, p.lb)
	return []*graph.Node{
		transposeUnlessIdentity(dl, backPermutation(lhs.Rank(), p.lb, lhsCross, pairedInOrder(p.rc, p.lc))),
		transposeUnlessIdentity(dr, backPermutation(rhs.Rank(), p.rb, rhsCross, pairedInOrder(p.lc, p.rc))),
	}
}

func transposeUnlessIdentity(x *graph.Node, perm []int) *graph.Node {
	for i, a := range perm {
		if i != a {
			return graph.TransposeAllAxes(x, perm...)
		}
	}
	return x
}

// crossAxes are the axes of a rank-r operand that are neither contracted nor batch, in order.
func crossAxes(rank int, contracting, batch []int) []int {
	var out []int
	for a := range rank {
		if !slices.Contains(contracting, a) && !slices.Contains(batch, a) {
			out = append(out, a)
		}
	}
	return out
}

func iotaFrom(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// pairedInOrder lists, for the other operand's contracting axes sorted ascending (the order DotGeneral leaves
// them as cross axes of the gradient product), the matching contracting axes of this operand.
func pairedInOrder(otherContracting, thisContracting []int) []int {
	idx := make([]int, len(otherContracting))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return otherContracting[a] - otherContracting[b] })
	out := make([]int, len(idx))
	for i, j := range idx {
		out[i] = thisContracting[j]
	}
	return out
}

// backPermutation returns the TransposeAllAxes permutation taking a gradient product whose axes are
// [batch..., cross..., contracting...] (each naming an axis of this operand) back to this operand's axis order.
func backPermutation(rank int, batch, cross, contracting []int) []int {
	resultToAxis := slices.Concat(batch, cross, contracting)
	perm := make([]int, rank)
	for r, a := range resultToAxis {
		perm[a] = r
	}
	return perm
}

// DotGradientEngine says which DotGeneral gradient graphs differentiate with: this package's, or GoMLX's own
// and why.
func DotGradientEngine() string {
	dotGradientMu.Lock()
	done, err := dotGradientDone, dotGradientErr
	dotGradientMu.Unlock()
	switch {
	case !done:
		return "GoMLX's own (no model built yet)"
	case err != nil:
		return fmt.Sprintf("GoMLX's own (%v)", err)
	}
	return "two DotGenerals (internal/kernels)"
}
