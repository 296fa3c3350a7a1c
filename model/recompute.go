package model

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// gradientCheckpointingParam is the context parameter (at the root scope) SetGradientCheckpointing sets.
const gradientCheckpointingParam = "gradient_checkpointing"

// recomputeParam is the context parameter (at the root scope) that, set to false, makes the custom gradients of
// swiGLU, and with gradient checkpointing those of attend and of a LoRA branch's dropout, read what they need
// from the forward pass instead of computing it again in the backward pass (see inBackward). Unset, it is true.
// Tests set it to false on a model to check that the gradients are the same bit for bit (TestRecomputeExact).
const recomputeParam = "recompute_in_backward"

// recomputing reports whether the graphs built with ctx let swiGLU's custom gradient compute σ(gate) again in the
// backward pass (recomputeParam).
func recomputing(ctx *context.Context) bool {
	return context.GetParamOr(ctx, recomputeParam, true)
}

// checkpointing reports whether the graphs built with ctx compute again in the backward pass the attention
// probabilities and a LoRA branch's dropout mask and dropped-out input: gradient checkpointing is on and
// recomputeParam is not false.
func checkpointing(ctx *context.Context) bool {
	return context.GetParamOr(ctx, gradientCheckpointingParam, false) && recomputing(ctx)
}

// SetGradientCheckpointing makes the training graphs built afterwards compute again in the backward pass what
// they would otherwise keep from the forward pass for it, where that can be done exactly: each layer's attention
// probabilities (attend: a [B, heads, T, T] float32 tensor per layer, for SmolLM2 at 8 x 512 tokens 72 MiB a
// layer, 2.1 GiB in all, for one more q · kᵀ product and softmax per layer) and, with lora_dropout, each LoRA
// branch's mask and dropped-out input (droppedOutProduct: the mask drawn again from the same random state). The
// values are the same bit for bit either way (TestRecomputeExact). The trainers set it from the config's
// gradient_checkpointing.
func (m *Model) SetGradientCheckpointing(on bool) {
	m.Ctx.InAbsPath(context.RootScope).SetParam(gradientCheckpointingParam, on)
}

// inBackward returns x as a value of the backward pass: Where(grad == grad, x, 0), for grad a gradient the
// reverse pass computes (what a custom gradient function receives, of x's shape) or a scalar reduced from one.
// It is x unless grad holds a NaN. Where it does, the gradients computed from x are NaN in the same places or
// reach NaN through it (a NaN in a layer's output gradient reaches its input's), and so is the step's gradient
// norm: every gradient computed from inBackward(x, grad) is the one computed from x, bit for bit, or NaN in both
// (TestRecomputeExact).
//
// Why: a custom gradient that recomputes a forward value (softmax probabilities, σ(gate)) instead of reading the
// forward pass's tensor does so on simplego, which runs the graph as built, but XLA merges identical
// expressions (common-subexpression elimination) and so keeps the forward's tensor from the forward pass to the
// backward pass, every layer's at once, as if nothing were recomputed. XLA cannot merge an expression of
// inBackward(x, grad) with one of x (the select is not an identity where grad is NaN), and it can compute it
// only once grad exists, in the backward pass; the forward's tensor then lives only until its last forward use.
// XLA has an instruction for this, the optimization barrier JAX's remat uses, which GoMLX v0.26 does not offer.
// XLA may fuse the ops that made x into the select, and then keeps their inputs instead of x: what is selected
// is chosen for that (attend selects the keys, whose ops read smaller tensors than the queries').
func inBackward(x, grad *Node) *Node {
	return Where(Equal(grad, grad), x, ZerosLike(x))
}
