package grpo

// This file compiles the trainer's graphs: the loss and its gradient, the old and reference
// log-probabilities, and what each optimizer step returns.

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX graph code reads best with the dot import.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/train"
)

// isInGraph reports whether the training graph computes the importance-sampling correction from its own
// forward pass: the policy has not moved since it sampled (Config.NeedsOldLogProbs false) and that forward pass
// is the one the old log-probs would come from (no LoRA dropout in it).
func (t *Trainer) isInGraph() bool {
	cfg := t.Config
	dropout := t.Model.LoRA() != nil && t.Model.LoRA().Dropout > 0 && !cfg.DisableDropout
	return cfg.VLLMImportanceSamplingCorrection && !cfg.NeedsOldLogProbs() && !dropout
}

// needsOldLogProbs reports whether a forward pass computes each generation batch's old log-probs before its
// optimizer steps: the policy moves in between, or the importance-sampling correction needs them and the
// training graph cannot take them from its own forward pass.
func (t *Trainer) needsOldLogProbs() bool {
	return t.Config.NeedsOldLogProbs() || (t.Config.VLLMImportanceSamplingCorrection && !t.isInGraph())
}

// compile builds the training and log-prob graphs (compiled per shape on
// first use, then reused).
func (t *Trainer) compile() error {
	cfg := t.Config
	t.Model.SetGradientCheckpointing(cfg.GradientCheckpointing)
	if err := t.Model.SetBF16(cfg.BF16); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if t.Ref != nil && cfg.BF16 { // the reference model trains nothing: all of it in bfloat16
		if err := t.Ref.Freeze(); err != nil {
			return fmt.Errorf("grpo: reference model: %w", err)
		}
		if err := t.Ref.SetBF16(true); err != nil {
			return fmt.Errorf("grpo: reference model: %w", err)
		}
	}
	t.vars = train.TrainableVariables(t.Model)
	if len(t.vars) == 0 {
		return fmt.Errorf("grpo: the model has no trainable variables")
	}
	opt := cfg.Optimizer()
	lossCfg := cfg.LossConfig()
	build := func(last bool) func(ctx *mlctx.Context, ins []*Node) []*Node {
		return func(ctx *mlctx.Context, ins []*Node) []*Node {
			in := lossInputs{tokens: ins[0], attn: ins[1], mask: ins[2], adv: ins[3], numItems: ins[4]}
			i := 5
			if t.needsOldLogProbs() {
				in.old = ins[i]
				i++
			}
			if cfg.Beta > 0 {
				in.ref = ins[i]
				i++
			}
			if cfg.VLLMImportanceSamplingCorrection {
				in.isRatio = ins[i] // the ratio, or the sampler's log-probs when the graph computes it
				i++
			}
			if last {
				in.lr = ins[i]
			}
			// The mask holds the columns from the first one the loss covers (lossColumns): the log-probs of the
			// earlier positions are not computed (TRL's logits_to_keep).
			from := in.tokens.Shape().Dim(1) - in.mask.Shape().Dim(1)
			if from > 0 {
				in.mask = Concatenate([]*Node{Zeros(in.mask.Graph(), shapes.Make(in.mask.DType(), in.mask.Shape().Dim(0), from)), in.mask}, 1)
			}
			// The loss's forward is a training one (a LoRA adapter's dropout acts) unless disable_dropout.
			ctx.SetTraining(in.tokens.Graph(), !cfg.DisableDropout)
			logp := t.Model.TokenLogProbsFrom(ctx, in.tokens, in.attn, cfg.Temperature, from)
			var isSums []*Node
			if t.isInGraph() {
				// The policy has not moved since it sampled: the old log-probs are this forward pass's own,
				// so the correction is computed here rather than after a separate forward pass.
				in.isRatio, isSums = cfg.importanceSamplingGraph(StopGradient(logp), in.isRatio, in.mask)
			}
			out, err := Loss(lossCfg, LossInputs{
				LogP: logp, OldLogP: in.old, RefLogP: in.ref, Mask: in.mask,
				Advantages: in.adv, NumItemsInBatch: in.numItems, ImportanceSamplingRatio: in.isRatio,
			})
			if err != nil {
				panic(err)
			}
			g := logp.Graph()
			nodes := make([]*Node, len(t.vars))
			for j, v := range t.vars {
				nodes[j] = v.ValueGraph(g)
			}
			grads := Gradient(out.Loss, nodes...)
			results := []*Node{out.Loss, out.ClipRatioLowMean, out.ClipRatioHighMean, out.ClipRatioRegionMean}
			if cfg.Beta > 0 {
				results = append(results, out.KL)
			}
			results = append(results, isSums...)
			if !last {
				if err := opt.AccumulateGraph(ctx, t.vars, grads); err != nil {
					panic(err)
				}
				return results
			}
			norm, err := opt.ApplyGraph(ctx, t.vars, grads, in.lr)
			if err != nil {
				panic(err)
			}
			return append(results, ConvertDType(norm, logp.DType()))
		}
	}
	var err error
	if t.accumulate, err = mlctx.NewExecAny(t.Model.Backend, t.Model.Ctx, build(false)); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if t.apply, err = mlctx.NewExecAny(t.Model.Backend, t.Model.Ctx, build(true)); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	// The AdamW update alone, on the accumulated gradients: for a step whose last micro-batch was left out
	// (zeroAdvantage). Compiled on its first use.
	applyOnly := func(ctx *mlctx.Context, lr *Node) *Node {
		norm, err := opt.ApplyGraph(ctx, t.vars, make([]*Node, len(t.vars)), lr)
		if err != nil {
			panic(err)
		}
		return ConvertDType(norm, dtypes.Float32)
	}
	if t.applyOnly, err = mlctx.NewExec(t.Model.Backend, t.Model.Ctx, applyOnly); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	// Room for the length buckets GoMLX's default allowed, and the start columns lossColumns adds.
	t.accumulate.SetMaxCache(DefaultExecMaxCacheSize + maxLossStarts)
	t.apply.SetMaxCache(DefaultExecMaxCacheSize + maxLossStarts)
	logProbs := func(m *model.Model) func(ctx *mlctx.Context, tokens, attn *Node) *Node {
		return func(ctx *mlctx.Context, tokens, attn *Node) *Node {
			return StopGradient(m.TokenLogProbsAt(ctx, tokens, attn, cfg.Temperature))
		}
	}
	if t.logProbs, err = mlctx.NewExec(t.Model.Backend, t.Model.Ctx, logProbs(t.Model)); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if t.Ref != nil {
		if t.refLogProbs, err = mlctx.NewExec(t.Ref.Backend, t.Ref.Ctx, logProbs(t.Ref)); err != nil {
			return fmt.Errorf("grpo: %w", err)
		}
	}
	return nil
}

// lossInputs is the order of a training graph's inputs.
type lossInputs struct{ tokens, attn, mask, adv, numItems, old, ref, isRatio, lr *Node }

// metricKeys lists the per-micro-batch metrics the training graph returns.
func metricKeys(cfg *Config) []string {
	keys := []string{"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}
	if cfg.Beta > 0 {
		keys = append(keys, "kl")
	}
	return keys
}
