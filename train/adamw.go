package train

import (
	"regexp"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX graph code reads best with the dot import.
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
)

// ClipGradNorm is torch.nn.utils.clip_grad_norm_ (L2): it returns the gradients scaled by
// min(1, maxNorm/(totalNorm+1e-6)) and the total norm before clipping (the trainer's "grad_norm").
// maxNorm <= 0 returns the gradients unchanged (transformers skips clipping then) with their norm.
func ClipGradNorm(grads []*Node, maxNorm float64) (clipped []*Node, totalNorm *Node) {
	if len(grads) == 0 {
		return nil, nil
	}
	dtype := grads[0].DType()
	var sumSq *Node
	for _, g := range grads {
		n := Sqrt(ReduceAllSum(Square(convertTo(g, dtype))))
		if sumSq == nil {
			sumSq = Square(n)
		} else {
			sumSq = Add(sumSq, Square(n))
		}
	}
	totalNorm = Sqrt(sumSq)
	if maxNorm <= 0 {
		return grads, totalNorm
	}
	coef := MinScalar(Div(Scalar(totalNorm.Graph(), dtype, maxNorm), AddScalar(totalNorm, 1e-6)), 1.0)
	clipped = make([]*Node, len(grads))
	for i, g := range grads {
		clipped[i] = Mul(g, convertTo(coef, g.DType()))
	}
	return clipped, totalNorm
}

// AdamW holds torch.optim.AdamW's hyperparameters (transformers' defaults: betas 0.9/0.999, eps 1e-8).
type AdamW struct {
	Beta1, Beta2, Epsilon, WeightDecay float64
}

// AdamW returns the optimizer settings of a (adam_beta1, adam_beta2, adam_epsilon, weight_decay).
func (a *Arguments) AdamW() AdamW {
	return AdamW{Beta1: a.AdamBeta1, Beta2: a.AdamBeta2, Epsilon: a.AdamEpsilon, WeightDecay: a.WeightDecay}
}

// Update is one torch.optim.AdamW step for one parameter, in torch's order of operations:
//
//	p *= 1 - lr*wd;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
//	p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//
// step is t, the 1-based count of updates including this one, and lr the learning rate: scalar nodes.
// decay false skips weight decay for this parameter (transformers exempts biases and norm weights:
// see NoDecay).
func (a AdamW) Update(param, grad, m, v, step, lr *Node, decay bool) (newParam, newM, newV *Node) {
	dtype := param.DType()
	grad, m, v = convertTo(grad, dtype), convertTo(m, dtype), convertTo(v, dtype)
	step, lr = convertTo(step, dtype), convertTo(lr, dtype)
	g := param.Graph()
	if decay && a.WeightDecay != 0 {
		param = Mul(param, OneMinus(MulScalar(lr, a.WeightDecay)))
	}
	newM = Add(MulScalar(m, a.Beta1), MulScalar(grad, 1-a.Beta1))
	newV = Add(MulScalar(v, a.Beta2), MulScalar(Mul(grad, grad), 1-a.Beta2))
	bc1 := OneMinus(Pow(Scalar(g, dtype, a.Beta1), step))
	bc2 := OneMinus(Pow(Scalar(g, dtype, a.Beta2), step))
	stepSize := Div(lr, bc1)
	denom := AddScalar(Div(Sqrt(newV), Sqrt(bc2)), a.Epsilon)
	newParam = Sub(param, Mul(stepSize, Div(newM, denom)))
	return newParam, newM, newV
}

// noDecayPatterns are transformers' get_decay_parameter_names exclusions (biases and norm layers).
var noDecayPatterns = regexp.MustCompile(`bias|layernorm|rmsnorm|(?:^|\.)norm(?:$|\.)|_norm(?:$|\.)`)

// NoDecay reports whether transformers' Trainer exempts the parameter with this name from weight
// decay: biases and normalisation weights. The name may be HF's dotted one
// ("model.layers.0.input_layernorm.weight") or a GoMLX scope path ("/model/layers/0/input_layernorm/weight").
func NoDecay(name string) bool {
	name = strings.TrimLeft(strings.ReplaceAll(strings.ToLower(name), "/", "."), ".")
	return noDecayPatterns.MatchString(name)
}

// GoMLXAdamW returns GoMLX's Adam configured as a's AdamW. Its update equals torch's AdamW
// (decoupled decay lr*wd*p, bias-corrected moments; tests check it step by step), but it decays every
// trainable variable, biases and norms included, and keeps its step counter in the loss dtype.
// Set the scheduled learning rate with optimizers.LearningRateVar before each step.
func (a *Arguments) GoMLXAdamW(dtype dtypes.DType) *optimizers.AdamConfig {
	return optimizers.Adam().
		LearningRate(a.LearningRate).
		Betas(a.AdamBeta1, a.AdamBeta2).
		Epsilon(a.AdamEpsilon).
		WeightDecay(a.WeightDecay).
		DType(dtype)
}

// convertTo converts x to dtype unless it already has it.
func convertTo(x *Node, dtype dtypes.DType) *Node {
	if x.DType() != dtype {
		return ConvertDType(x, dtype)
	}
	return x
}
