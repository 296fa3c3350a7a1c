package grpo

import (
	"context"
	"fmt"
	"math"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/report"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/train"
)

// This file is recovery branching: the turn-level credit a whole-trajectory
// reward cannot give. A trajectory that met a setback (a tool error, an
// empty result, a malformed call, a failing lint) is continued from there
// recovery_generations times, each continuation in its own fork of the
// sandbox as the setback left it, and scored with the same reward. The
// continuations form a branch group of their own: a continuation's
// advantage is its reward against the branch group's mean (scaled as
// scale_rewards says), and only its own tokens carry it; the prefix is
// trained once, in its root, with the root group's advantage.

// recovery is a generation batch's branches.
type recovery struct {
	trajs      []*chat.Trajectory
	advantages []float64
	samples    []report.Completion
	metrics    map[string]float64
}

// branchRoot is a trajectory of a kept group that met a setback.
type branchRoot struct {
	group, index int
	it           scored
}

// recover branches up to recovery_max_branches_per_step roots of the kept
// groups at their first setback, in batch order, and scores and credits
// their continuations.
func (t *Trainer) recover(ctx context.Context, groups [][]scored, round int64) (*recovery, error) {
	cfg := t.Config
	var roots []branchRoot
	for g, grp := range groups {
		for j, it := range grp {
			if len(roots) < cfg.RecoveryMaxBranchesPerStep && it.res != nil && it.res.Setback != nil && it.traj.Error == "" {
				roots = append(roots, branchRoot{g, j, it})
			}
		}
	}
	rec := &recovery{metrics: map[string]float64{
		"recovery/branches":     float64(len(roots)),
		"recovery/reward_mean":  math.NaN(),
		"recovery/success_rate": math.NaN(),
	}}
	if len(roots) == 0 {
		return rec, nil
	}
	r, err := t.runner(round)
	if err != nil {
		return nil, err
	}
	results := make([]*rollout.Result, len(roots))
	for i, rt := range roots {
		results[i] = rt.it.res
	}
	n := cfg.RecoveryGenerations
	branches, err := r.Branch(ctx, results, n, forcedContinuations(cfg.RecoveryForcedCallRatio, n))
	if err != nil {
		return nil, fmt.Errorf("grpo: recovery branching: %w", err)
	}
	if cfg.RecoveryForcedOpenerLoss {
		p, err := t.creditOpeners(branches)
		if err != nil {
			return nil, fmt.Errorf("grpo: recovery branching: %w", err)
		}
		rec.metrics["recovery/forced_opener_prob"] = p
	}
	items := t.scoreResults(branches)
	rewards, err := t.weightedRewards(items)
	if err != nil {
		return nil, err
	}
	adv, err := BranchAdvantages(rewards, n, cfg.ScaleRewards)
	if err != nil {
		return nil, err
	}
	successes, counted := 0, 0
	for i, it := range items {
		b := branches[i]
		// The prefix is the root's: trained there, with the root's advantage.
		for k := 0; k < b.BranchAt && k < len(it.traj.Mask); k++ {
			it.traj.Mask[k] = 0
		}
		rec.trajs = append(rec.trajs, it.traj)
		rec.advantages = append(rec.advantages, adv[i])
		if !math.IsNaN(rewards[i]) {
			counted++
			if fullCredit(it.scores) {
				successes++
			}
		}
		rt := roots[i/n]
		root := rt.index
		c := t.sample(it, rt.group, cfg.NumGenerations+i, rewards[i], adv[i])
		c.BranchOf, c.BranchTurn, c.BranchTrigger = &root, rt.it.res.Setback.Turn+1, rt.it.res.Setback.Trigger
		c.BranchForced, c.BranchForcedLook = b.Forced, b.ForcedLook
		rec.samples = append(rec.samples, c)
	}
	rec.metrics["recovery/reward_mean"] = nanMean(rewards)
	if counted > 0 {
		rec.metrics["recovery/success_rate"] = float64(successes) / float64(counted)
	}
	return rec, nil
}

// creditOpeners puts the forced tokens of every forced continuation (the
// tool-call opener; with recovery_forced_look, the whole look and the
// opener after its observation) into its loss
// (recovery_forced_opener_loss): mask 1, and as the old log-probabilities
// the policy's own for those tokens in their context (one forward pass
// through the last forced token), so that they carry their continuation's
// branch advantage as tokens the policy had sampled would, their ratio
// starting at 1. It returns the policy's mean probability of all the
// forced tokens of a continuation (NaN when none was forced).
func (t *Trainer) creditOpeners(branches []*rollout.Result) (float64, error) {
	bs := t.Config.PerDeviceTrainBatchSize
	gen := &generation{}
	var forced []*rollout.Result
	for _, b := range branches {
		if !b.Forced || len(b.ForcedSpans) == 0 {
			continue
		}
		end := b.ForcedSpans[len(b.ForcedSpans)-1][1]
		if len(b.Tokens) < end {
			continue
		}
		forced = append(forced, b)
		gen.trajs = append(gen.trajs, &chat.Trajectory{Tokens: b.Tokens[:end], Mask: b.Mask[:end]})
		gen.length = max(gen.length, end)
	}
	if len(forced) == 0 {
		return math.NaN(), nil
	}
	for len(gen.trajs)%bs != 0 { // whole micro-batches: the shapes the graphs compiled for
		gen.trajs = append(gen.trajs, gen.trajs[0])
	}
	gen.advantages = make([]float64, len(gen.trajs))
	gen.length = train.SequenceBucket(gen.length)
	logp, err := t.batchLogProbs(t.logProbs, gen)
	if err != nil {
		return 0, fmt.Errorf("forced openers' log-probs: %w", err)
	}
	prob := 0.0
	for i, b := range forced {
		sum := 0.0
		for _, sp := range b.ForcedSpans {
			for k := sp[0]; k < sp[1]; k++ {
				b.Mask[k] = 1
				b.OldLogProbs[k] = logp[i*gen.length+k]
				sum += float64(b.OldLogProbs[k])
			}
		}
		prob += math.Exp(sum)
	}
	return prob / float64(len(forced)), nil
}

// forcedContinuations is how many of a setback's n continuations start
// with the tool-call opener: the share ratio of n, rounded to the nearest.
func forcedContinuations(ratio float64, n int) int {
	return int(math.Round(ratio * float64(n)))
}

// fullCredit reports whether every reward function gave its full credit
// (a score of at least 1): a continuation that recovered.
func fullCredit(scores []float64) bool {
	for _, s := range scores {
		if math.IsNaN(s) || s < 1 {
			return false
		}
	}
	return len(scores) > 0
}

// BranchAdvantages are the advantages of recovery continuations laid out
// in branch groups of n (the continuations of one setback): each reward
// minus its branch group's mean, divided by the group's (Bessel) std +
// 1e-4 under scale "group", by the std of all the continuations under
// "batch", not at all under "none"; NaN rewards (left out) get 0. It is
// Advantages with the branch group in the place of the prompt's group.
func BranchAdvantages(rewards []float64, n int, scale ScaleRewards) ([]float64, error) {
	st, err := Advantages(rewards, n, scale)
	if err != nil {
		return nil, err
	}
	return st.Advantages, nil
}

// addRecovery appends the branches to the generation batch, padded to
// whole micro-batches of bs with sequences that train nothing.
func (gen *generation) addRecovery(rec *recovery, bs int) {
	for k, v := range rec.metrics {
		gen.metrics[k] = v
	}
	if len(rec.trajs) == 0 {
		return
	}
	gen.trajs = append(gen.trajs, rec.trajs...)
	gen.advantages = append(gen.advantages, rec.advantages...)
	for len(gen.trajs)%bs != 0 {
		pad := *rec.trajs[0]
		pad.Mask = make([]uint8, len(pad.Mask))
		gen.trajs = append(gen.trajs, &pad)
		gen.advantages = append(gen.advantages, 0)
	}
	gen.samples = append(gen.samples, rec.samples...)
}

// stepMicroBatches lists the micro-batches optimizer step offset of the
// cycle trains on: its ga micro-batches of the root groups, then the
// branch micro-batches that fall to it. One pass over the root groups
// takes base/ga steps; branch micro-batch e is trained at the steps where
// offset = e modulo that, so every micro-batch is trained as often as the
// root groups' (num_iterations times a cycle).
func (gen *generation) stepMicroBatches(offset, ga, bs int) []int {
	base := gen.baseMicroBatches
	if base == 0 { // a batch made without recovery in mind: all of it is the roots'
		base = len(gen.trajs) / bs
	}
	out := make([]int, 0, ga)
	for k := 0; k < ga; k++ {
		out = append(out, (offset*ga+k)%base)
	}
	pass := max(1, base/ga)
	for e := base; e < len(gen.trajs)/bs; e++ {
		if (e-base)%pass == offset%pass {
			out = append(out, e)
		}
	}
	return out
}
