package model

// bfloat16 (TrainingArguments' bf16: true), as transformers and peft train on a bfloat16 base in what they store
// and multiply (transformers also keeps the activations in bfloat16; here they stay float32):
// the frozen weights are stored in bfloat16, half the memory of float32, and the matmuls of the linear layers
// (the attention and MLP projections and the output projection) take bfloat16 inputs, the activation rounded to
// bfloat16 as torch's autocast rounds it, and give their result back as float32 for what follows. What needs the
// range or the precision stays float32: the residual stream, RMSNorm's statistics, the rotary embedding, the
// attention scores, their softmax and the products q · kᵀ and p · v, SwiGLU, the final log-softmax and the
// per-token log-probs that GRPO's ratio and loss read, and everything that trains: a LoRA adapter's A and B (and its
// branch, computed in float32 from the float32 input as peft computes a float32 adapter on a bfloat16 base),
// trainable token rows, and in full fine-tuning the weights themselves, which stay float32 (the master copy; the
// matmuls round them to bfloat16 on the way in), as does the optimizer state.
//
// XLA computes a bfloat16 DotGeneral with float32 accumulation (on the CPU plugin a YNNPACK kernel;
// TestBF16DotAccumulation checks it) and rounds the result to bfloat16: GoMLX v0.26's DotGeneral returns its
// inputs' dtype (go-xla's builder could ask for a float32 result, but GoMLX does not expose it), so the product
// is rounded once more at its output, exactly as a torch bfloat16 nn.Linear's is. Weights are rounded to nearest
// even, as torch's .to(torch.bfloat16) rounds them.
//
// The simplego engine cannot run it: GoMLX v0.26's simplego converts float32 to bfloat16 by truncation where torch
// and XLA round to nearest (an error twice as large, and biased), and runs bfloat16 matmuls on its own Go kernel,
// not on OpenBLAS. SetBF16 refuses it there.

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// bf16Param is the context parameter (at the root scope) SetBF16 sets.
const bf16Param = "bf16"

// ErrBF16SimpleGo is SetBF16's refusal on the simplego engine.
var ErrBF16SimpleGo = errors.New("bf16 needs engine xla: the simplego engine (GoMLX v0.26) rounds float32 to bfloat16 by truncation, not to nearest as torch and XLA do, and runs bfloat16 matmuls on its Go kernel, not OpenBLAS")

// FreezeBF16 readies a model that only samples: every weight frozen (nothing trains), then stored in bfloat16 by
// SetBF16, so decoding reads half the bytes. It fails on the simplego engine (ErrBF16SimpleGo).
func (m *Model) FreezeBF16() error {
	if err := m.Freeze(); err != nil {
		return err
	}
	return m.SetBF16(true)
}

// SetBF16 turns bfloat16 on or off (see this file's comment): on, the frozen base weights are stored in bfloat16
// and the graphs built afterwards run the linear layers' matmuls on bfloat16 inputs; off, every weight is float32
// again (the values bfloat16 rounded stay rounded). Weights that train stay float32 either way, and a weight that
// AddLoRA or LoadAdapter freezes later is stored in bfloat16 then; Merge makes them float32 again, trainable.
// It fails on the simplego engine (ErrBF16SimpleGo).
func (m *Model) SetBF16(on bool) error {
	if on {
		if _, ok := m.Backend.(*simplego.Backend); ok {
			return ErrBF16SimpleGo
		}
	}
	m.Ctx.InAbsPath(context.RootScope).SetParam(bf16Param, on)
	if err := m.storeWeights(); err != nil {
		return fmt.Errorf("bf16: %w", err)
	}
	m.resetExecs()
	return nil
}

// BF16 reports whether the model runs in bfloat16 (SetBF16).
func (m *Model) BF16() bool { return isBF16(m.Ctx) }

// isBF16 reports whether the graphs built with ctx run the linear layers' matmuls in bfloat16.
func isBF16(ctx *context.Context) bool { return context.GetParamOr(ctx, bf16Param, false) }

// storeWeights stores each base weight as SetBF16 wants it: bfloat16 when bf16 is on and the weight is frozen,
// float32 otherwise. Weights already so are left alone.
func (m *Model) storeWeights() error {
	on := m.BF16()
	for _, p := range m.Config.params() {
		scope, name := scopeOf(p.name)
		v := m.Ctx.GetVariableByScopeAndName(scope, name)
		if v == nil {
			continue
		}
		want := dtypes.Float32
		if on && !v.Trainable {
			want = dtypes.BFloat16
		}
		if v.Shape().DType == want {
			continue
		}
		data, shape, err := m.Tensor(p.name)
		if err != nil {
			return err
		}
		t := tensors.FromFlatDataAndDimensions(data, shape...)
		if want == dtypes.BFloat16 {
			t = tensors.FromFlatDataAndDimensions(toBF16(data), shape...)
		}
		if err := v.SetValue(t); err != nil {
			return fmt.Errorf("tensor %q: %w", p.name, err)
		}
	}
	return nil
}

// toBF16 rounds float32 values to bfloat16, to nearest even (bf16FromF32).
func toBF16(data []float32) []bfloat16.BFloat16 {
	out := make([]bfloat16.BFloat16, len(data))
	for i, v := range data {
		out[i] = bfloat16.FromBits(bf16FromF32(v))
	}
	return out
}

// float32Data returns a tensor's values as float32: its own when it is float32, widened from bfloat16 (exactly)
// when it is bfloat16.
func float32Data(t *tensors.Tensor) ([]float32, error) {
	if t.DType() != dtypes.BFloat16 {
		return tensors.CopyFlatData[float32](t)
	}
	b, err := tensors.CopyFlatData[bfloat16.BFloat16](t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(b))
	for i, v := range b {
		out[i] = v.Float32()
	}
	return out, nil
}

// asFloat32 is x as float32: a bfloat16 weight read where float32 is computed (a norm's weight, a bias, an
// embedding row).
func asFloat32(x *Node) *Node { return ConvertDType(x, dtypes.Float32) }

// project is x [..., in] · wᵀ for a linear layer's weight w [out, in], float32: in bfloat16 (isBF16) the product of
// x and w rounded to bfloat16, its result rounded to bfloat16 and widened back.
func project(ctx *context.Context, x, w *Node) *Node {
	return dot(isBF16(ctx), x, []int{x.Rank() - 1}, nil, w, []int{1}, nil)
}

// dot is DotGeneral, on bfloat16 inputs when bf16 is set (see project): its result is float32 either way.
func dot(bf16 bool, lhs *Node, lhsContracting, lhsBatch []int, rhs *Node, rhsContracting, rhsBatch []int) *Node {
	if !bf16 {
		return DotGeneral(lhs, lhsContracting, lhsBatch, rhs, rhsContracting, rhsBatch)
	}
	y := DotGeneral(ConvertDType(lhs, dtypes.BFloat16), lhsContracting, lhsBatch, ConvertDType(rhs, dtypes.BFloat16), rhsContracting, rhsBatch)
	return asFloat32(y)
}
