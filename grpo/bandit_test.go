package grpo

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// TestGRPOLearnsABandit puts the pieces together on the smallest policy there is: a softmax over 4
// actions (one token per completion) whose reward is 1 for action 2 and 0 otherwise. Each step samples
// a group of 8 completions, computes TRL's group advantages, the dapo loss and one Optimizer step
// (clip + AdamW). The probability of the rewarded action must rise from 1/4 to above 0.9 (0.96-0.97 over seeds).
func TestGRPOLearnsABandit(t *testing.T) {
	const actions, group, steps = 4, 8, 60
	cfg := Default()
	cfg.LearningRate = 0.1
	cfg.NumGenerations = group
	ctx := context.New()
	logits := ctx.In("policy").VariableWithValue("logits", make([]float32, actions))
	vars := []*context.Variable{logits}
	opt := cfg.Optimizer()
	lossCfg := cfg.LossConfig()
	exec, err := context.NewExecAny(testBackend(), ctx, func(ctx *context.Context, ins []*Node) []*Node {
		chosen, adv, numItems, lr := ins[0], ins[1], ins[2], ins[3]
		g := chosen.Graph()
		w := logits.ValueGraph(g)
		logp := LogSoftmax(w, -1)                                                                  // [A]
		picked := ReduceSum(Mul(ExpandAxes(logp, 0), OneHot(chosen, actions, dtypes.Float32)), -1) // [B]
		perToken := ExpandAxes(picked, -1)                                                         // [B, 1]
		out, err := Loss(lossCfg, LossInputs{LogP: perToken, Mask: OnesLike(perToken), Advantages: adv, NumItemsInBatch: numItems})
		if err != nil {
			t.Fatal(err)
		}
		grad := Gradient(out.Loss, w)
		norm, err := opt.ApplyGraph(ctx, vars, grad, lr)
		if err != nil {
			t.Fatal(err)
		}
		return []*Node{out.Loss, norm}
	})
	if err != nil {
		t.Fatal(err)
	}
	probs := func() []float64 {
		v := tensors.MustCopyFlatData[float32](logits.MustValue())
		p, sum := make([]float64, actions), 0.0
		for i := range v {
			p[i] = float64(v[i])
		}
		mx := p[0]
		for _, x := range p {
			mx = max(mx, x)
		}
		for i := range p {
			p[i] = math.Exp(p[i] - mx)
			sum += p[i]
		}
		for i := range p {
			p[i] /= sum
		}
		return p
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var meanRewards []float64
	for step := 0; step < steps; step++ {
		p := probs()
		chosen := make([]int32, group)
		rewards := make([]float64, group)
		for i := range chosen {
			u, a := rng.Float64(), 0
			for a < actions-1 && u > p[a] {
				u -= p[a]
				a++
			}
			chosen[i] = int32(a)
			if a == 2 {
				rewards[i] = 1
			}
		}
		st, err := Advantages(rewards, group, cfg.ScaleRewards)
		if err != nil {
			t.Fatal(err)
		}
		meanRewards = append(meanRewards, st.Reward)
		adv := make([]float32, group)
		for i, a := range st.Advantages {
			adv[i] = float32(a)
		}
		lr, err := cfg.LearningRateAt(step, steps)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := exec.Exec(chosen, adv, float32(group), float32(lr)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("P(rewarded action) %.3f after %d steps", probs()[2], steps)
	if p := probs(); p[2] < 0.9 {
		t.Errorf("after %d GRPO steps P(rewarded action) = %.3f, want > 0.9 (probs %v)", steps, p[2], p)
	}
	first, last := 0.0, 0.0
	for i := 0; i < 5; i++ {
		first += meanRewards[i] / 5
		last += meanRewards[steps-5+i] / 5
	}
	if last < first+0.3 {
		t.Errorf("mean reward over the first 5 steps %.2f, last 5 %.2f: want a rise of at least 0.3", first, last)
	}
	if n, _ := opt.Steps(ctx); n != steps {
		t.Errorf("optimizer took %d steps, want %d", n, steps)
	}
}
