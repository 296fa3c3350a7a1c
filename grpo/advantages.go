package grpo

import (
	"fmt"
	"math"
)

// AdvantageStats is what TRL computes from the rewards of one generation batch.
type AdvantageStats struct {
	// Advantages per completion, in the order of the rewards (0 where the reward is NaN: unscorable).
	Advantages []float64
	// Std is the std each completion's advantage was scaled by (its group's, or the batch's for
	// scale_rewards "batch"; for "none" the group's, used only for IsStdZero as TRL does).
	Std []float64
	// IsStdZero marks completions whose Std is zero (torch.isclose(std, 0): |std| <= 1e-8).
	IsStdZero []bool
	// FracRewardZeroStd is TRL's frac_reward_zero_std: the mean of IsStdZero.
	FracRewardZeroStd float64
	// Reward and RewardStd are TRL's logged reward and reward_std (nan-mean and nan-std over the batch).
	Reward, RewardStd float64
}

// Advantages computes group-relative advantages exactly as TRL's _generate_and_score_completions
// (multi_objective_aggregation "sum_then_normalize"): rewards are the weighted sums per completion,
// laid out group by group (num_generations consecutive completions per prompt). A NaN reward marks an
// unscorable completion: it is left out of its group's mean and std and gets advantage 0.
//
//	A = r - mean(group);  "group": A /= std(group) + 1e-4;  "batch": A /= std(batch) + 1e-4;  "none": A unscaled,
//
// with std Bessel-corrected (nanstd), as torch.
func Advantages(rewards []float64, numGenerations int, scale ScaleRewards) (*AdvantageStats, error) {
	n := len(rewards)
	if numGenerations < 1 {
		return nil, fmt.Errorf("advantages: num_generations must be >= 1, got %d", numGenerations)
	}
	if n%numGenerations != 0 {
		return nil, fmt.Errorf("advantages: %d rewards are not whole groups of num_generations %d", n, numGenerations)
	}
	switch scale {
	case ScaleGroup, ScaleBatch, ScaleNone:
	default:
		return nil, fmt.Errorf("advantages: scale_rewards %q: must be group, batch or none", scale)
	}
	st := &AdvantageStats{
		Advantages: make([]float64, n),
		Std:        make([]float64, n),
		IsStdZero:  make([]bool, n),
	}
	batchStd := math.NaN()
	if n > 1 {
		batchStd = nanStd(rewards)
	} else {
		batchStd = 0
	}
	for g := 0; g < n; g += numGenerations {
		grp := rewards[g : g+numGenerations]
		mean := nanMean(grp)
		std := 0.0
		if numGenerations > 1 {
			std = nanStd(grp)
		}
		if scale == ScaleBatch {
			std = batchStd
		}
		for i, r := range grp {
			a := r - mean
			if scale != ScaleNone {
				a /= std + 1e-4
			}
			if math.IsNaN(a) {
				a = 0
			}
			st.Advantages[g+i] = a
			st.Std[g+i] = std
			st.IsStdZero[g+i] = math.Abs(std) <= 1e-8
		}
	}
	zero := 0
	for _, z := range st.IsStdZero {
		if z {
			zero++
		}
	}
	if n > 0 {
		st.FracRewardZeroStd = float64(zero) / float64(n)
	}
	st.Reward = nanMean(rewards)
	st.RewardStd = nanStd(rewards)
	return st, nil
}

// nanMean is torch.nanmean: the mean of the non-NaN values (NaN if there are none).
func nanMean(x []float64) float64 {
	sum, n := 0.0, 0
	for _, v := range x {
		if !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// nanStd is TRL's nanstd: Bessel-corrected std over the non-NaN values (NaN if fewer than two).
func nanStd(x []float64) float64 {
	mean := nanMean(x)
	sum, n := 0.0, 0
	for _, v := range x {
		if !math.IsNaN(v) {
			d := v - mean
			sum += d * d
			n++
		}
	}
	if n < 2 {
		return math.NaN()
	}
	return math.Sqrt(sum / float64(n) * (float64(n) / float64(n-1)))
}

// ZeroStdGroups reports, per group of numGenerations consecutive rewards, whether its rewards all agree
// (std zero by TRL's frac_reward_zero_std test). Such groups have all-zero advantages and teach nothing.
func ZeroStdGroups(rewards []float64, numGenerations int) ([]bool, error) {
	if numGenerations < 1 || len(rewards)%numGenerations != 0 {
		return nil, fmt.Errorf("zero-std groups: %d rewards are not whole groups of num_generations %d", len(rewards), numGenerations)
	}
	out := make([]bool, len(rewards)/numGenerations)
	for g := range out {
		grp := rewards[g*numGenerations : (g+1)*numGenerations]
		std := 0.0
		if numGenerations > 1 {
			std = nanStd(grp)
		}
		out[g] = math.Abs(std) <= 1e-8
	}
	return out, nil
}

// DynamicBatch collects groups for dynamic sampling (DAPO's filter_groups): groups whose rewards all
// agree are dropped, the others kept until the batch holds the wanted number of groups. The trainer
// generates more groups while !Full(), up to its round limit, then trains on Groups().
type DynamicBatch[T any] struct {
	want, numGenerations int
	groups               [][]T
	rewards              [][]float64
	dropped              int
	spareGroups          [][]T
	spareRewards         [][]float64
}

// NewDynamicBatch wants wantGroups groups of numGenerations items each.
func NewDynamicBatch[T any](wantGroups, numGenerations int) *DynamicBatch[T] {
	return &DynamicBatch[T]{want: wantGroups, numGenerations: numGenerations}
}

// Add offers one group (its items and their rewards). It reports whether the group was kept: it is
// dropped when its rewards all agree, or when the batch is already full.
func (b *DynamicBatch[T]) Add(items []T, rewards []float64) (bool, error) {
	if len(items) != b.numGenerations || len(rewards) != b.numGenerations {
		return false, fmt.Errorf("dynamic batch: a group has %d items and %d rewards, want %d of each",
			len(items), len(rewards), b.numGenerations)
	}
	if b.Full() {
		return false, nil
	}
	zero, err := ZeroStdGroups(rewards, b.numGenerations)
	if err != nil {
		return false, err
	}
	if zero[0] {
		b.dropped++
		b.spareGroups = append(b.spareGroups, items)
		b.spareRewards = append(b.spareRewards, rewards)
		return false, nil
	}
	b.groups = append(b.groups, items)
	b.rewards = append(b.rewards, rewards)
	return true, nil
}

// Keep adds a group unconditionally (generation without dynamic sampling).
func (b *DynamicBatch[T]) Keep(items []T, rewards []float64) {
	b.groups = append(b.groups, items)
	b.rewards = append(b.rewards, rewards)
}

// TopUp fills a batch that is not full (generation ran out of rounds) with dropped groups, in the order
// they were dropped: they teach nothing, but the step keeps its shape.
func (b *DynamicBatch[T]) TopUp() {
	for i := 0; !b.Full() && i < len(b.spareGroups); i++ {
		b.groups = append(b.groups, b.spareGroups[i])
		b.rewards = append(b.rewards, b.spareRewards[i])
	}
	b.spareGroups, b.spareRewards = nil, nil
}

// Full reports whether the wanted number of groups has been kept.
func (b *DynamicBatch[T]) Full() bool { return len(b.groups) >= b.want }

// Dropped is the number of groups dropped so far because their rewards all agreed.
func (b *DynamicBatch[T]) Dropped() int { return b.dropped }

// Groups returns the kept groups and their rewards, in the order they were added.
func (b *DynamicBatch[T]) Groups() ([][]T, [][]float64) { return b.groups, b.rewards }
