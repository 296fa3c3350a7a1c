package grpo

// This file is one optimizer step: a generation batch cut into micro-batches, their log-probs and
// loss columns, and the accumulated update.

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/model"
)

// batchLogProbs runs exec (the policy's or the reference model's
// log-probabilities, no gradient) over every micro-batch of gen.
func (t *Trainer) batchLogProbs(exec *mlctx.Exec, gen *generation) ([]float32, error) {
	return t.batchLogProbsBut(exec, gen, nil)
}

// batchLogProbsBut is batchLogProbs with the micro-batches for which skip
// holds left out: their log-probs are 0.
func (t *Trainer) batchLogProbsBut(exec *mlctx.Exec, gen *generation, skip func(mb int) bool) ([]float32, error) {
	bs := t.Config.PerDeviceTrainBatchSize
	out := make([]float32, 0, len(gen.trajs)*gen.length)
	for from := 0; from < len(gen.trajs); from += bs {
		to := min(from+bs, len(gen.trajs))
		if skip != nil && skip(from/bs) {
			out = append(out, make([]float32, (to-from)*gen.length)...)
			continue
		}
		tokens, attn, _, _, _, _, _, err := t.microBatch(gen, from, to)
		if err != nil {
			return nil, err
		}
		res, err := exec.Exec(tokens, attn)
		if err != nil {
			return nil, fmt.Errorf("log-probs: %w", err)
		}
		out = append(out, tensors.MustCopyFlatData[float32](res[0])...)
	}
	return out, nil
}

// microBatch packs completions [from, to) of a generation into tensors.
func (t *Trainer) microBatch(gen *generation, from, to int) (tokens, attn, mask, adv *tensors.Tensor, old, ref, isRatio *tensors.Tensor, err error) {
	seqs := make([][]int, to-from)
	masks := make([][]float32, to-from)
	advs := make([]float32, to-from)
	for b := range seqs {
		tr := gen.trajs[from+b]
		seqs[b] = tr.Tokens
		masks[b] = make([]float32, len(tr.Tokens))
		if !t.Config.MaskTruncatedCompletions || !tr.Truncated {
			for i := range tr.Tokens {
				masks[b][i] = float32(tr.Mask[i])
			}
		}
		advs[b] = float32(gen.advantages[from+b])
	}
	pad := 0
	if t.Model.Config.PadTokenID != nil {
		pad = *t.Model.Config.PadTokenID
	}
	if tokens, attn, err = model.PadBatch(seqs, gen.length, pad, false); err != nil {
		return
	}
	if mask, err = model.PadFloats(masks, gen.length, false); err != nil {
		return
	}
	adv = tensors.FromFlatDataAndDimensions(advs, len(advs))
	slice := func(all []float32) *tensors.Tensor {
		if all == nil {
			return nil
		}
		return tensors.FromFlatDataAndDimensions(append([]float32(nil), all[from*gen.length:to*gen.length]...), to-from, gen.length)
	}
	return tokens, attn, mask, adv, slice(gen.old), slice(gen.ref), slice(gen.isRatio), nil
}

// lossColumnStep is the granularity of the first column the training graph computes log-probs for.
const lossColumnStep = 64

// maxLossStarts bounds the training graphs compiled for a start column other than 0: each (length, start) pair
// is one more graph in the accumulate and apply executables, whose caches (GoMLX refuses to compile past them)
// get that many more entries than the length buckets had. Pairs beyond it run the whole-sequence graph.
const maxLossStarts = 16

// lossColumns returns the columns of mask [B, T] from the first that is non-zero in any row, rounded down to a
// multiple of lossColumnStep (all of them when none is, or when maxLossStarts other (length, start) pairs are
// compiled already): the training graph computes log-probs for those positions only, as TRL's
// logits_to_keep covers the completion.
func (t *Trainer) lossColumns(mask *tensors.Tensor) *tensors.Tensor {
	from := lossStart(mask)
	if from == 0 {
		return mask
	}
	key := [2]int{mask.Shape().Dim(1), from}
	if !t.lossStarts[key] {
		if len(t.lossStarts) >= maxLossStarts {
			return mask
		}
		if t.lossStarts == nil {
			t.lossStarts = map[[2]int]bool{}
		}
		t.lossStarts[key] = true
	}
	return maskColumns(mask, from)
}

// lossStart is the first column of mask [B, T] that is non-zero in any row, rounded down to a multiple of
// lossColumnStep; 0 when no column is.
func lossStart(mask *tensors.Tensor) int {
	b, t := mask.Shape().Dim(0), mask.Shape().Dim(1)
	flat := tensors.MustCopyFlatData[float32](mask)
	first := t
	for r := range b {
		for c, v := range flat[r*t : r*t+first] {
			if v != 0 {
				first = c
				break
			}
		}
	}
	if first == t {
		return 0
	}
	return first / lossColumnStep * lossColumnStep
}

// maskColumns returns columns from..T-1 of mask [B, T].
func maskColumns(mask *tensors.Tensor, from int) *tensors.Tensor {
	b, t := mask.Shape().Dim(0), mask.Shape().Dim(1)
	flat := tensors.MustCopyFlatData[float32](mask)
	tail := make([]float32, 0, b*(t-from))
	for r := range b {
		tail = append(tail, flat[r*t+from:(r+1)*t]...)
	}
	return tensors.FromFlatDataAndDimensions(tail, b, t-from)
}

// samplingLogProbs lays out the sampler's log-probs of gen's trajectories
// and their loss mask as the training batch holds them ([len(trajs) * length]).
func (gen *generation) samplingLogProbs(cfg *Config) (logp, mask []float32) {
	logp = make([]float32, len(gen.trajs)*gen.length)
	mask = make([]float32, len(gen.trajs)*gen.length)
	for b, tr := range gen.trajs {
		copy(logp[b*gen.length:], tr.OldLogProbs)
		if cfg.MaskTruncatedCompletions && tr.Truncated {
			continue
		}
		for i, m := range tr.Mask {
			mask[b*gen.length+i] = float32(m)
		}
	}
	return logp, mask
}

// zeroAdvantage reports whether micro-batch mb of gen adds nothing to the
// step: every completion in it has advantage 0 and no other term of the loss
// reads it (beta 0, so no KL term). Its loss, its gradient and its clip ratios
// are then exactly 0 (a ratio is clipped only with an advantage of its sign;
// the importance-sampling weight multiplies a zero term), so the step leaves
// its forward and backward passes out; the loss's normalizer (gen.numItems)
// still counts its tokens, as TRL's does. Where the training graph computes
// the importance-sampling metrics, they cover the micro-batches it ran.
func (t *Trainer) zeroAdvantage(gen *generation, mb int) bool {
	if t.Config.Beta != 0 || t.keepZeroAdvantage {
		return false
	}
	bs := t.Config.PerDeviceTrainBatchSize
	for _, a := range gen.advantages[mb*bs : min((mb+1)*bs, len(gen.advantages))] {
		if a != 0 {
			return false
		}
	}
	return true
}

// optimizerStep runs the gradient_accumulation_steps micro-batches of one
// optimizer step (offset within the generation's cycle) and applies AdamW.
// Micro-batches whose every advantage is 0 are left out (zeroAdvantage) and
// count as one metrics row of zeros each. The last micro-batch normally
// carries the AdamW update (t.apply); when it is left out, the update runs
// alone on the accumulated gradients (t.applyOnly), also when every
// micro-batch was left out: AdamW moves the weights on zero gradients too
// (its moments), as TRL's optimizer.step() does.
func (t *Trainer) optimizerStep(gen *generation, offset int, lr float64) (loss, gradNorm float64, metrics []map[string]float64, err error) {
	cfg := t.Config
	bs, ga := cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps
	all := gen.stepMicroBatches(offset, ga, bs)
	mbs := make([]int, 0, len(all))
	for _, mb := range all {
		if !t.zeroAdvantage(gen, mb) {
			mbs = append(mbs, mb)
		}
	}
	applyAlone := len(mbs) == 0 || mbs[len(mbs)-1] != all[len(all)-1]
	for range len(all) - len(mbs) {
		m := map[string]float64{"micro_batches/skipped_ratio": 1}
		for _, key := range metricKeys(cfg) {
			m[key] = 0
		}
		metrics = append(metrics, m)
	}
	inGraphIS := t.isInGraph()
	var is isSums
	for k, mb := range mbs {
		tokens, attn, mask, adv, old, ref, isRatio, err := t.microBatch(gen, mb*bs, (mb+1)*bs)
		if err != nil {
			return 0, 0, nil, err
		}
		// The graph reads from the mask's width where the loss starts (see lossColumns).
		args := []any{tokens, attn, t.lossColumns(mask), adv, gen.numItems}
		if old != nil {
			args = append(args, old)
		}
		if ref != nil {
			args = append(args, ref)
		}
		if isRatio != nil {
			args = append(args, isRatio)
		}
		last := k == len(mbs)-1 && !applyAlone
		exec := t.accumulate
		if last {
			exec = t.apply
			args = append(args, float32(lr))
		}
		res, err := exec.Exec(args...)
		if err != nil {
			return 0, 0, nil, err
		}
		loss += float64(tensors.ToScalar[float32](res[0]))
		m := map[string]float64{"micro_batches/skipped_ratio": 0}
		keys := metricKeys(cfg)
		for i, key := range keys {
			m[key] = float64(tensors.ToScalar[float32](res[1+i]))
		}
		metrics = append(metrics, m)
		if inGraphIS {
			v := make([]float64, isSumsCount)
			for i := range v {
				v[i] = tensors.ToScalar[float64](res[1+len(keys)+i])
			}
			if k == 0 {
				is = newISSums(v)
			} else {
				is.add(newISSums(v))
			}
		}
		if last {
			gradNorm = float64(tensors.ToScalar[float32](res[len(res)-1]))
		}
	}
	if applyAlone {
		res, err := t.applyOnly.Exec(float32(lr))
		if err != nil {
			return 0, 0, nil, err
		}
		gradNorm = float64(tensors.ToScalar[float32](res[0]))
	}
	if inGraphIS && len(mbs) > 0 {
		// Over the generation batch's micro-batches that ran, as ImportanceSampling computes them: its one step.
		metrics = append(metrics, is.metrics())
	}
	return loss, gradNorm, metrics, nil
}
