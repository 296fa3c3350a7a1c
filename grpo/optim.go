package grpo

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX graph code reads best with the dot import.
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
)

// WarmupSteps is transformers' TrainingArguments.get_warmup_steps: warmupSteps when >= 1; a ratio of
// totalSteps when in (0, 1) (transformers v5's form); else ceil(totalSteps x warmupRatio).
func WarmupSteps(warmupSteps, warmupRatio float64, totalSteps int) int {
	switch {
	case warmupSteps >= 1:
		return int(warmupSteps)
	case warmupSteps > 0:
		return int(math.Ceil(float64(totalSteps) * warmupSteps))
	}
	return int(math.Ceil(float64(totalSteps) * warmupRatio))
}

// LRLambda is the multiplier of the base learning rate that transformers' schedulers
// (get_scheduler with torch's LambdaLR) apply after `step` optimizer steps (LambdaLR's last_epoch):
// the update number s (1-based) uses LRLambda(s-1).
//
//	linear:               warmup s/w, then max(0, (total-s)/max(1, total-w))
//	cosine:               warmup, then max(0, 0.5*(1+cos(pi*progress))), progress = (s-w)/max(1, total-w)
//	constant:             1
//	constant_with_warmup: warmup, then 1
func LRLambda(schedulerType string, step, warmupSteps, totalSteps int) (float64, error) {
	s, w, t := float64(step), float64(warmupSteps), float64(totalSteps)
	warm := func() float64 { return s / math.Max(1, w) }
	switch schedulerType {
	case SchedulerLinear:
		if step < warmupSteps {
			return warm(), nil
		}
		return math.Max(0, (t-s)/math.Max(1, t-w)), nil
	case SchedulerCosine:
		if step < warmupSteps {
			return warm(), nil
		}
		progress := (s - w) / math.Max(1, t-w)
		const numCycles = 0.5
		return math.Max(0, 0.5*(1+math.Cos(math.Pi*numCycles*2*progress))), nil
	case SchedulerConstant:
		return 1, nil
	case SchedulerConstantWithWarmup:
		if step < warmupSteps {
			return warm(), nil
		}
		return 1, nil
	}
	return 0, fmt.Errorf("lr_scheduler_type %q is not supported", schedulerType)
}

// LearningRateAt is the learning rate of the update that follows `step` completed optimizer steps
// (step 0 is the first update), for a run of totalSteps optimizer steps.
func (c *Config) LearningRateAt(step, totalSteps int) (float64, error) {
	f, err := LRLambda(c.LRSchedulerType, step, WarmupSteps(c.WarmupSteps, c.WarmupRatio, totalSteps), totalSteps)
	return c.LearningRate * f, err
}

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

// AdamW returns the optimizer settings of c (adam_beta1, adam_beta2, adam_epsilon, weight_decay).
func (c *Config) AdamW() AdamW {
	return AdamW{Beta1: c.AdamBeta1, Beta2: c.AdamBeta2, Epsilon: c.AdamEpsilon, WeightDecay: c.WeightDecay}
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

// GoMLXAdamW returns GoMLX's Adam configured as this config's AdamW. Its update equals torch's AdamW
// (decoupled decay lr*wd*p, bias-corrected moments; tests check it step by step), but it decays every
// trainable variable, biases and norms included, and keeps its step counter in the loss dtype.
// Set the scheduled learning rate with optimizers.LearningRateVar before each step.
func (c *Config) GoMLXAdamW(dtype dtypes.DType) *optimizers.AdamConfig {
	return optimizers.Adam().
		LearningRate(c.LearningRate).
		Betas(c.AdamBeta1, c.AdamBeta2).
		Epsilon(c.AdamEpsilon).
		WeightDecay(c.WeightDecay).
		DType(dtype)
}
