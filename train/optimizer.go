package train

import (
	"fmt"
	"slices"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX graph code reads best with the dot import.
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
)

// OptimizerScope is the absolute context scope under which Optimizer keeps its state: gradient
// accumulators, AdamW moments and the step count. Saving the context saves the optimizer.
const OptimizerScope = "/optimizer"

// Optimizer is the transformers Trainer's optimisation step: gradients of the micro-batches of one
// step summed (the trainers' losses are already normalised for accumulation), then
// torch's clip_grad_norm_(max_grad_norm), then torch AdamW with transformers' two parameter groups
// (no weight decay for biases and norm weights). Its state lives in context variables under
// OptimizerScope, so checkpoints and resumption carry it.
type Optimizer struct {
	AdamW       AdamW
	MaxGradNorm float64 // <= 0: no clipping
	// Decay reports whether a variable gets weight decay; nil: !NoDecay(v.ScopeAndName()).
	Decay func(v *context.Variable) bool
}

// Optimizer returns the optimizer of a (adam_*, weight_decay, max_grad_norm).
func (a *Arguments) Optimizer() *Optimizer {
	return &Optimizer{AdamW: a.AdamW(), MaxGradNorm: a.MaxGradNorm}
}

func (o *Optimizer) state(ctx *context.Context, kind string, v *context.Variable) *context.Variable {
	return ctx.Checked(false).InAbsPath(OptimizerScope+"/"+kind+v.Scope()).
		WithInitializer(initializers.Zero).
		VariableWithShape(v.Name(), v.Shape()).
		SetTrainable(false)
}

func (o *Optimizer) stepVar(ctx *context.Context) *context.Variable {
	return ctx.Checked(false).InAbsPath(OptimizerScope).VariableWithValue("step", int64(0)).SetTrainable(false)
}

func checkGrads(vars []*context.Variable, grads []*Node) error {
	if len(vars) != len(grads) {
		return fmt.Errorf("optimizer: %d variables but %d gradients", len(vars), len(grads))
	}
	for i, v := range vars {
		if grads[i] == nil {
			continue
		}
		if !slices.Equal(v.Shape().Dimensions, grads[i].Shape().Dimensions) {
			return fmt.Errorf("optimizer: gradient %d has shape %v, variable %s has %v",
				i, grads[i].Shape().Dimensions, v.ScopeAndName(), v.Shape().Dimensions)
		}
	}
	return nil
}

// AccumulateGraph adds the gradients of one micro-batch (in the order of vars; nil entries are
// zero) to the accumulators. Use it for every micro-batch of a step but the last, which goes to
// ApplyGraph.
func (o *Optimizer) AccumulateGraph(ctx *context.Context, vars []*context.Variable, grads []*Node) error {
	if err := checkGrads(vars, grads); err != nil {
		return err
	}
	for i, v := range vars {
		if grads[i] == nil {
			continue
		}
		acc := o.state(ctx, "acc", v)
		g := grads[i].Graph()
		acc.SetValueGraph(Add(acc.ValueGraph(g), convertTo(grads[i], v.Shape().DType)))
	}
	return nil
}

// ApplyGraph finishes a step: it adds the last micro-batch's gradients (nil entries are zero) to
// the accumulated ones, clips their global norm, takes one AdamW step with learning rate lr (a scalar
// node: feed the scheduled value, see Config.LearningRateAt), zeroes the accumulators and returns the
// gradient norm before clipping (the trainer's "grad_norm").
func (o *Optimizer) ApplyGraph(ctx *context.Context, vars []*context.Variable, grads []*Node, lr *Node) (*Node, error) {
	if err := checkGrads(vars, grads); err != nil {
		return nil, err
	}
	if len(vars) == 0 {
		return nil, fmt.Errorf("optimizer: no variables")
	}
	g := lr.Graph()
	total := make([]*Node, len(vars))
	for i, v := range vars {
		acc := o.state(ctx, "acc", v)
		sum := acc.ValueGraph(g)
		if grads[i] != nil {
			sum = Add(sum, convertTo(grads[i], v.Shape().DType))
		}
		total[i] = sum
		acc.SetValueGraph(ZerosLike(sum))
	}
	clipped, norm := ClipGradNorm(total, o.MaxGradNorm)
	stepVar := o.stepVar(ctx)
	step := AddScalar(stepVar.ValueGraph(g), 1)
	stepVar.SetValueGraph(step)
	for i, v := range vars {
		m, s := o.state(ctx, "m", v), o.state(ctx, "v", v)
		decay := !NoDecay(v.ScopeAndName())
		if o.Decay != nil {
			decay = o.Decay(v)
		}
		dtype := v.Shape().DType
		p, nm, nv := o.AdamW.Update(v.ValueGraph(g), clipped[i], m.ValueGraph(g), s.ValueGraph(g),
			ConvertDType(step, dtype), convertTo(lr, dtype), decay)
		v.SetValueGraph(p)
		m.SetValueGraph(nm)
		s.SetValueGraph(nv)
	}
	return norm, nil
}

// Steps returns the number of optimizer steps taken (the AdamW step count t).
func (o *Optimizer) Steps(ctx *context.Context) (int64, error) {
	t, err := o.stepVar(ctx).Value()
	if err != nil {
		return 0, err
	}
	n, ok := t.Value().(int64)
	if !ok {
		return 0, fmt.Errorf("optimizer step is %T, want int64", t.Value())
	}
	return n, nil
}
