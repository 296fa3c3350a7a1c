package rollout_test

import (
	"context"
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX graph code reads best with the dot import.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
)

// TestLossMaskZeroGradient builds the training graph as grpo's trainer
// does (the model's TokenLogProbsAt, then grpo.Loss) over real multi-turn
// trajectories with tool output, and checks, for every loss type (with KL)
// and for sequence-level ratios: the gradient of the loss
// with respect to each token's log-prob is exactly zero on tool-output and
// prompt tokens and nonzero on sampled ones, and changing tool-output
// tokens' log-probs leaves the loss unchanged.
func TestLossMaskZeroGradient(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	m, _ := chainPolicyModel(t)
	r := runner(t, &model.Policy{M: m, Capacity: 1024}, rollout.Config{NumGenerations: 2, MaxCompletionLength: 300, MaxToolCallingIterations: 2,
		Sample: policy.SampleOptions{Temperature: 1, Seed: 9}})
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	longest, observed := 0, 0
	seqs := make([][]int, len(trajs))
	masks := make([][]float32, len(trajs))
	olds := make([][]float32, len(trajs))
	for i, tr := range trajs {
		longest = max(longest, len(tr.Tokens))
		for k, id := range tr.Tokens {
			seqs[i] = append(seqs[i], id)
			masks[i] = append(masks[i], float32(tr.Mask[k]))
			// Old log-probs a little off the current ones, so ratios are not all 1.
			olds[i] = append(olds[i], tr.OldLogProbs[k]+0.05*float32(k%3-1))
			if k >= tr.PromptLen && tr.Mask[k] == 0 {
				observed++
			}
		}
	}
	if observed == 0 {
		t.Fatal("no tool-output tokens in the trajectories")
	}
	T := model.Bucket(longest)
	tokens, attn, err := model.PadBatch(seqs, T, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	mask, _ := model.PadFloats(masks, T, false)
	old, _ := model.PadFloats(olds, T, false)
	ref, _ := model.PadFloats(olds, T, false)
	B := len(trajs)
	adv := tensors.FromFlatDataAndDimensions([]float32{1, -1}, B)
	// delta perturbs the log-probs of tool-output and prompt tokens only.
	delta := make([]float32, B*T)
	for i, tr := range trajs {
		for k := range tr.Tokens {
			if tr.Mask[k] == 0 {
				delta[i*T+k] = 0.7 + 0.1*float32(k%5)
			}
		}
	}
	deltaT := tensors.FromFlatDataAndDimensions(delta, B, T)
	zero := tensors.FromFlatDataAndDimensions(make([]float32, B*T), B, T)

	type variant struct {
		lossType, level string
		beta            float64
	}
	var variants []variant
	for _, lt := range []string{grpo.LossGRPO, grpo.LossBNPO, grpo.LossDrGRPO, grpo.LossDAPO} {
		variants = append(variants, variant{lt, grpo.LevelToken, 0.04})
	}
	variants = append(variants, variant{grpo.LossGRPO, grpo.LevelSequence, 0}, variant{grpo.LossDAPO, grpo.LevelSequence, 0.04})
	for _, v := range variants {
		lossType, level, beta := v.lossType, v.level, v.beta
		cfg := grpo.Default()
		cfg.LossType, cfg.ImportanceSamplingLevel, cfg.Beta, cfg.MaxCompletionLength = lossType, level, beta, 300
		lc := cfg.LossConfig()
		exec, err := mlctx.NewExecAny(m.Backend, m.Ctx, func(ctx *mlctx.Context, ins []*Node) []*Node {
			tokens, attn, mask, adv, old, ref, delta := ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], ins[6]
			logp := Add(m.TokenLogProbsAt(ctx, tokens, attn, cfg.Temperature), delta)
			in := grpo.LossInputs{LogP: logp, OldLogP: old, Mask: mask, Advantages: adv,
				NumItemsInBatch: Const(logp.Graph(), float32(40))}
			if beta > 0 {
				in.RefLogP = ref
			}
			out, err := grpo.Loss(lc, in)
			if err != nil {
				panic(err)
			}
			return []*Node{out.Loss, Gradient(out.Loss, logp)[0]}
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := exec.Exec(tokens, attn, mask, adv, old, ref, zero)
		if err != nil {
			t.Fatalf("%s/%s/beta %g: %v", lossType, level, beta, err)
		}
		loss := tensors.ToScalar[float32](res[0])
		grad := tensors.MustCopyFlatData[float32](res[1])
		res2, err := exec.Exec(tokens, attn, mask, adv, old, ref, deltaT)
		if err != nil {
			t.Fatal(err)
		}
		loss2 := tensors.ToScalar[float32](res2[0])
		if loss != loss2 || math.IsNaN(float64(loss)) {
			t.Errorf("%s/%s/beta %g: loss %g changes to %g when tool-output log-probs change", lossType, level, beta, loss, loss2)
		}
		nonzero := 0
		for i, tr := range trajs {
			for k := 0; k < T; k++ {
				g := grad[i*T+k]
				if k >= len(tr.Tokens) || tr.Mask[k] == 0 {
					if g != 0 {
						t.Errorf("%s/%s/beta %g: trajectory %d token %d (mask 0) has gradient %g", lossType, level, beta, i, k, g)
					}
				} else if g != 0 {
					nonzero++
				}
			}
		}
		if nonzero == 0 {
			t.Errorf("%s/%s/beta %g: no sampled token has a gradient", lossType, level, beta)
		}
	}
}
