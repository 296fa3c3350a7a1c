package train

import (
	"path"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
)

// TestScheduleMatchesLambdaLR compares the learning rate of every update with torch's LambdaLR driven
// by transformers' schedule lambdas (linear, cosine, constant, constant_with_warmup).
func TestScheduleMatchesLambdaLR(t *testing.T) {
	g := golden(t)
	if len(g.ScheduleCases) == 0 {
		t.Fatal("no schedule cases")
	}
	for _, c := range g.ScheduleCases {
		cfg := DefaultArguments()
		cfg.LearningRate, cfg.LRSchedulerType, cfg.WarmupRatio = c.BaseLR, c.Kind, c.WarmupRatio
		for step, want := range c.LRs {
			got, err := cfg.LearningRateAt(step, c.Total)
			if err != nil {
				t.Fatal(err)
			}
			if !close64(got, want, 1e-15) {
				t.Errorf("%s total=%d warmup_ratio=%g step %d: lr %.17g, LambdaLR %.17g", c.Kind, c.Total, c.WarmupRatio, step, got, want)
			}
		}
	}
	for _, c := range []struct {
		steps, ratio float64
		total, want  int
	}{{0, 0.1, 95, 10}, {5, 0.5, 100, 5}, {0.1, 0, 95, 10}, {0, 0, 10, 0}} {
		if got := WarmupSteps(c.steps, c.ratio, c.total); got != c.want {
			t.Errorf("WarmupSteps(%v, %v, %d) = %d, want %d", c.steps, c.ratio, c.total, got, c.want)
		}
	}
	if _, err := LRLambda("polynomial", 0, 0, 10); err == nil {
		t.Error("unsupported scheduler: want an error")
	}
}

func adamCase(t *testing.T) (params [][]float64, dims [][]int) {
	a := golden(t).AdamW
	for i, p := range a.P0 {
		params = append(params, flatten(p))
		dims = append(dims, a.Shapes[i])
	}
	return params, dims
}

// TestClipAndAdamWMatchTorch runs six steps of clip_grad_norm_(1.0) then AdamW (weight decay 0.1 on two
// tensors, none on the third, a changing learning rate) with ClipGradNorm and AdamW.Update, and compares
// grad norms and parameters after every step with torch.
func TestClipAndAdamWMatchTorch(t *testing.T) {
	a := golden(t).AdamW
	params, dims := adamCase(t)
	n := len(params)
	opt := AdamW{Beta1: a.Betas[0], Beta2: a.Betas[1], Epsilon: a.Eps, WeightDecay: a.WeightDecay[0]}
	decay := make([]bool, n)
	for i := range decay {
		decay[i] = a.WeightDecay[i] != 0
	}
	// inputs: params(n), grads(n), m(n), v(n), step, lr; outputs: params, m, v, grad norm
	exec, err := NewExecAny(testBackend(), func(ins []*Node) []*Node {
		p, gr, m, v := ins[:n], ins[n:2*n], ins[2*n:3*n], ins[3*n:4*n]
		step, lr := ins[4*n], ins[4*n+1]
		clipped, norm := ClipGradNorm(gr, a.MaxNorm)
		var outP, outM, outV []*Node
		for i := range p {
			np, nm, nv := opt.Update(p[i], clipped[i], m[i], v[i], step, lr, decay[i])
			outP, outM, outV = append(outP, np), append(outM, nm), append(outV, nv)
		}
		return append(append(append(outP, outM...), outV...), norm)
	})
	if err != nil {
		t.Fatal(err)
	}
	cur := make([]*tensors.Tensor, n)
	m := make([]*tensors.Tensor, n)
	v := make([]*tensors.Tensor, n)
	for i := range params {
		cur[i] = tensors.FromFlatDataAndDimensions(params[i], dims[i]...)
		m[i] = tensors.FromFlatDataAndDimensions(make([]float64, len(params[i])), dims[i]...)
		v[i] = tensors.FromFlatDataAndDimensions(make([]float64, len(params[i])), dims[i]...)
	}
	for s := range a.LRs {
		args := []any{}
		for i := range cur {
			args = append(args, cur[i])
		}
		for i := range cur {
			args = append(args, tensors.FromFlatDataAndDimensions(flatten(a.Grads[s][i]), dims[i]...))
		}
		for i := range cur {
			args = append(args, m[i])
		}
		for i := range cur {
			args = append(args, v[i])
		}
		args = append(args, tensors.FromScalar(float64(s+1)), tensors.FromScalar(a.LRs[s]))
		outs, err := exec.Exec(args...)
		if err != nil {
			t.Fatal(err)
		}
		copy(cur, outs[:n])
		copy(m, outs[n:2*n])
		copy(v, outs[2*n:3*n])
		if got := asF64(outs[3*n])[0]; !close64(got, a.GradNorms[s], 1e-12) {
			t.Errorf("step %d: grad norm %.15g, torch %.15g", s+1, got, a.GradNorms[s])
		}
		for i := range cur {
			want := flatten(a.Params[s][i])
			got := asF64(cur[i])
			for j := range want {
				if !close64(got[j], want[j], 1e-12) {
					t.Errorf("step %d param %d[%d] = %.15g, torch AdamW %.15g", s+1, i, j, got[j], want[j])
				}
			}
		}
	}
}

// TestGoMLXAdamMatchesTorchAdamW checks that GoMLX's Adam configured by Arguments.GoMLXAdamW takes the
// same steps as torch.optim.AdamW (with weight decay on every tensor: GoMLX cannot exempt some), fed
// the same clipped gradients, so the trainer may use it instead of AdamW.Update.
func TestGoMLXAdamMatchesTorchAdamW(t *testing.T) {
	a := golden(t).AdamW
	params, dims := adamCase(t)
	// torch's history decays tensors 0 and 1 only: check GoMLX on those two, with decay 0.1.
	cfg := DefaultArguments()
	cfg.WeightDecay = a.WeightDecay[0]
	cfg.AdamBeta1, cfg.AdamBeta2, cfg.AdamEpsilon = a.Betas[0], a.Betas[1], a.Eps
	ctx := context.New()
	opt := cfg.GoMLXAdamW(dtypes.Float64).Done()
	vars := make([]*context.Variable, 2)
	for i := range vars {
		vars[i] = ctx.In("model").VariableWithValue(string(rune('a'+i)), tensors.FromFlatDataAndDimensions(params[i], dims[i]...))
	}
	// The third tensor only enters the global norm; it is not trained here.
	exec, err := context.NewExecAny(testBackend(), ctx, func(ctx *context.Context, ins []*Node) *Node {
		g := ins[0].Graph()
		vals := []*Node{vars[0].ValueGraph(g), vars[1].ValueGraph(g)}
		// loss = sum(g0*p0) + sum(g1*p1): its gradient is (g0, g1); clip with the third grad included.
		clipped, _ := ClipGradNorm([]*Node{ins[0], ins[1], ins[2]}, a.MaxNorm)
		loss := Add(ReduceAllSum(Mul(StopGradient(clipped[0]), vals[0])), ReduceAllSum(Mul(StopGradient(clipped[1]), vals[1])))
		opt.UpdateGraph(ctx, g, loss)
		return loss
	})
	if err != nil {
		t.Fatal(err)
	}
	lrVar := optimizers.LearningRateVar(ctx, dtypes.Float64, cfg.LearningRate)
	for s := range a.LRs {
		if err := lrVar.SetValue(tensors.FromScalar(a.LRs[s])); err != nil {
			t.Fatal(err)
		}
		var args []any
		for i := 0; i < 3; i++ {
			args = append(args, tensors.FromFlatDataAndDimensions(flatten(a.Grads[s][i]), dims[i]...))
		}
		if _, err := exec.Exec(args...); err != nil {
			t.Fatal(err)
		}
		for i := range vars {
			got := asF64(vars[i].MustValue())
			want := flatten(a.Params[s][i])
			for j := range want {
				if !close64(got[j], want[j], 1e-12) {
					t.Errorf("step %d param %d[%d] = %.15g, torch AdamW %.15g", s+1, i, j, got[j], want[j])
				}
			}
		}
	}
}

func TestClipGradNormDisabled(t *testing.T) {
	exec, err := NewExecAny(testBackend(), func(x *Node) (*Node, *Node) {
		c, n := ClipGradNorm([]*Node{x}, 0)
		return c[0], n
	})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := exec.Exec(tensors.FromFlatDataAndDimensions([]float64{3, 4}, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got := asF64(outs[0]); got[0] != 3 || got[1] != 4 {
		t.Errorf("max_grad_norm 0 changed the gradient: %v", got)
	}
	if n := asF64(outs[1])[0]; n != 5 {
		t.Errorf("grad norm %v, want 5", n)
	}
}

func TestNoDecay(t *testing.T) {
	for name, want := range map[string]bool{
		"model.layers.0.self_attn.q_proj.weight":         false,
		"model.layers.0.self_attn.q_proj.bias":           true,
		"model.layers.0.input_layernorm.weight":          true,
		"model.layers.0.post_attention_layernorm.weight": true,
		"model.norm.weight":                              true,
		"model.embed_tokens.weight":                      false,
		"lm_head.weight":                                 false,
	} {
		if got := NoDecay(name); got != want {
			t.Errorf("NoDecay(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestOptimizerMatchesTorch runs Optimizer (state in a GoMLX context) for six steps, each step's
// gradient split over two micro-batches (AccumulateGraph then ApplyGraph), against torch's
// clip_grad_norm_ + AdamW with transformers' parameter groups (the "bias" tensor gets no decay).
func TestOptimizerMatchesTorch(t *testing.T) {
	a := golden(t).AdamW
	params, dims := adamCase(t)
	ctx := context.New()
	names := []string{"layers/0/q_proj/weight", "layers/0/up_proj/weight", "layers/0/q_proj/bias"}
	vars := make([]*context.Variable, len(params))
	for i := range params {
		scope, name := path.Split(names[i])
		vars[i] = ctx.InAbsPath("/model/"+scope).VariableWithValue(name, tensors.FromFlatDataAndDimensions(params[i], dims[i]...))
	}
	cfg := DefaultArguments()
	cfg.WeightDecay, cfg.MaxGradNorm = a.WeightDecay[0], a.MaxNorm
	cfg.AdamBeta1, cfg.AdamBeta2, cfg.AdamEpsilon = a.Betas[0], a.Betas[1], a.Eps
	opt := cfg.Optimizer()
	const first = 0.25 // share of each gradient in the first micro-batch
	accumulate, err := context.NewExecAny(testBackend(), ctx, func(ctx *context.Context, ins []*Node) *Node {
		grads := make([]*Node, len(ins))
		for i, g := range ins {
			grads[i] = MulScalar(g, first)
		}
		if err := opt.AccumulateGraph(ctx, vars, grads); err != nil {
			t.Fatal(err)
		}
		return ReduceAllSum(ins[0])
	})
	if err != nil {
		t.Fatal(err)
	}
	apply, err := context.NewExecAny(testBackend(), ctx, func(ctx *context.Context, ins []*Node) *Node {
		grads := make([]*Node, len(vars))
		for i := range vars {
			grads[i] = MulScalar(ins[i], 1-first)
		}
		norm, err := opt.ApplyGraph(ctx, vars, grads, ins[len(vars)])
		if err != nil {
			t.Fatal(err)
		}
		return norm
	})
	if err != nil {
		t.Fatal(err)
	}
	for s := range a.LRs {
		var args []any
		for i := range vars {
			args = append(args, tensors.FromFlatDataAndDimensions(flatten(a.Grads[s][i]), dims[i]...))
		}
		if _, err := accumulate.Exec(args...); err != nil {
			t.Fatal(err)
		}
		outs, err := apply.Exec(append(args, tensors.FromScalar(a.LRs[s]))...)
		if err != nil {
			t.Fatal(err)
		}
		if got := asF64(outs[0])[0]; !close64(got, a.GradNorms[s], 1e-12) {
			t.Errorf("step %d: grad norm %.15g, torch %.15g", s+1, got, a.GradNorms[s])
		}
		for i := range vars {
			got := asF64(vars[i].MustValue())
			for j, want := range flatten(a.Params[s][i]) {
				if !close64(got[j], want, 1e-12) {
					t.Errorf("step %d %s[%d] = %.15g, torch %.15g", s+1, names[i], j, got[j], want)
				}
			}
		}
	}
	if n, err := opt.Steps(ctx); err != nil || n != int64(len(a.LRs)) {
		t.Errorf("Steps = %d, %v; want %d", n, err, len(a.LRs))
	}
	if err := opt.AccumulateGraph(ctx, vars, nil); err == nil {
		t.Error("AccumulateGraph with no gradients for 3 variables: want an error")
	}
}
