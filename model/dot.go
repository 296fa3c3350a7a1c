package model

import (
	"slices"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.
)

// dot is graph.DotGeneral with a gradient made of DotGenerals.
//
// GoMLX v0.26's DotGeneral gradient multiplies broadcast operands and reduces, materializing a tensor of
// [batch x lhs-cross x rhs-cross x contracting] elements: for one 2048x256 by 256x2048 matmul that is 1G floats, so
// training steps ran out of memory. Here the product is computed with its inputs' gradients stopped, an identity
// with a custom gradient on the output captures the incoming gradient v, and identities with custom gradients on
// the inputs (tied to the output by a zero-weighted term so that reverse-mode reaches them, after the output
// since they were created first) return dL/dlhs = v . rhs and dL/drhs = v . lhs as DotGenerals.
// When grad is false it is plain DotGeneral (inference graphs).
func dot(grad bool, lhs *Node, lhsContracting, lhsBatch []int, rhs *Node, rhsContracting, rhsBatch []int) *Node {
	if !grad {
		return DotGeneral(lhs, lhsContracting, lhsBatch, rhs, rhsContracting, rhsBatch)
	}
	lhsCross := crossAxes(lhs.Rank(), lhsContracting, lhsBatch)
	rhsCross := crossAxes(rhs.Rank(), rhsContracting, rhsBatch)
	nb, nlc, nrc := len(lhsBatch), len(lhsCross), len(rhsCross)
	var v *Node // gradient arriving at the output, set by the output's custom gradient
	lhsID := IdentityWithCustomGradient(lhs, func(_, _ *Node) *Node {
		if v == nil {
			return ZerosLike(lhs)
		}
		// v: [batch, lhsCross, rhsCross] . rhs over rhsCross -> [batch, lhsCross, rhs's contracting axes in order].
		r := DotGeneral(v, iotaFrom(nb+nlc, nrc), iotaFrom(0, nb), rhs, rhsCross, rhsBatch)
		return TransposeAllAxes(r, backPermutation(lhs.Rank(), lhsBatch, lhsCross, pairedInOrder(rhsContracting, lhsContracting))...)
	})
	rhsID := IdentityWithCustomGradient(rhs, func(_, _ *Node) *Node {
		if v == nil {
			return ZerosLike(rhs)
		}
		r := DotGeneral(v, iotaFrom(nb, nlc), iotaFrom(0, nb), lhs, lhsCross, lhsBatch)
		return TransposeAllAxes(r, backPermutation(rhs.Rank(), rhsBatch, rhsCross, pairedInOrder(lhsContracting, rhsContracting))...)
	})
	y := DotGeneral(StopGradient(lhsID), lhsContracting, lhsBatch, StopGradient(rhsID), rhsContracting, rhsBatch)
	y = IdentityWithCustomGradient(y, func(_, vOut *Node) *Node {
		v = vOut
		return vOut // stops at the StopGradients above
	})
	zero := MulScalar(Add(ReduceAllSum(lhsID), ReduceAllSum(rhsID)), 0)
	return Add(y, zero)
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
