package grpo

import (
	"fmt"
	"testing"
)

// TestAdvantagesMatchTRL compares with the advantages, frac_reward_zero_std, reward and reward_std that
// TRL's own GRPOTrainer._generate_and_score_completions computes (testdata/golden.py), for scale_rewards
// group, batch and none, including a group whose rewards all agree, pairs, and NaN (unscorable) rewards.
// TRL holds rewards in float32, so the bound is 1e-6.
func TestAdvantagesMatchTRL(t *testing.T) {
	g := golden(t)
	if len(g.AdvantageCases) == 0 {
		t.Fatal("no advantage cases in golden file")
	}
	for _, c := range g.AdvantageCases {
		t.Run(c.Name, func(t *testing.T) {
			rewards := make([]float64, len(c.Rewards))
			for i, r := range c.Rewards {
				rewards[i] = float64(r)
			}
			st, err := Advantages(rewards, c.NumGenerations, ScaleRewards(c.ScaleRewards))
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range c.Advantages {
				if !close64(st.Advantages[i], float64(w), 1e-6) {
					t.Errorf("advantage[%d] = %.15g, TRL %.15g", i, st.Advantages[i], float64(w))
				}
			}
			for name, pair := range map[string][2]float64{
				"frac_reward_zero_std": {st.FracRewardZeroStd, float64(c.FracRewardZeroStd)},
				"reward":               {st.Reward, float64(c.Reward)},
				"reward_std":           {st.RewardStd, float64(c.RewardStd)},
			} {
				if !close64(pair[0], pair[1], 1e-6) {
					t.Errorf("%s = %.15g, TRL %.15g", name, pair[0], pair[1])
				}
			}
		})
	}
}

func TestAdvantagesErrors(t *testing.T) {
	if _, err := Advantages([]float64{1, 2, 3}, 2, ScaleGroup); err == nil {
		t.Error("3 rewards in groups of 2: want an error")
	}
	if _, err := Advantages([]float64{1, 2}, 2, "mean"); err == nil {
		t.Error("scale_rewards mean: want an error")
	}
}

func TestDynamicBatch(t *testing.T) {
	b := NewDynamicBatch[string](2, 3)
	offers := []struct {
		rewards []float64
		kept    bool
	}{
		{[]float64{1, 1, 1}, false},       // all agree: dropped
		{[]float64{0, 0.3, 1}, true},      // kept
		{[]float64{0.5, 0.5, 0.5}, false}, // dropped
		{[]float64{0, 0, 1}, true},        // kept: now full
		{[]float64{0, 1, 1}, false},       // full: not taken
	}
	for i, o := range offers {
		items := []string{fmt.Sprint(i, "a"), fmt.Sprint(i, "b"), fmt.Sprint(i, "c")}
		kept, err := b.Add(items, o.rewards)
		if err != nil {
			t.Fatal(err)
		}
		if kept != o.kept {
			t.Errorf("offer %d %v: kept=%v, want %v", i, o.rewards, kept, o.kept)
		}
	}
	if !b.Full() || b.Dropped() != 2 {
		t.Errorf("Full=%v Dropped=%d, want true 2", b.Full(), b.Dropped())
	}
	groups, rewards := b.Groups()
	if len(groups) != 2 || groups[0][0] != "1a" || groups[1][2] != "3c" || rewards[1][2] != 1 {
		t.Errorf("groups %v rewards %v", groups, rewards)
	}
	// Every kept group has a non-zero std, so its advantages are not all zero.
	var flat []float64
	for _, r := range rewards {
		flat = append(flat, r...)
	}
	st, err := Advantages(flat, 3, ScaleGroup)
	if err != nil {
		t.Fatal(err)
	}
	if st.FracRewardZeroStd != 0 {
		t.Errorf("after dynamic sampling frac_reward_zero_std = %v, want 0", st.FracRewardZeroStd)
	}
	if _, err := b.Add([]string{"x"}, []float64{1}); err == nil {
		t.Error("a group of the wrong size: want an error")
	}
}

func ExampleAdvantages() {
	// Two prompts, four completions each; the second group's rewards all agree.
	rewards := []float64{0, 1, 0.3, 0.6, 1, 1, 1, 1}
	st, _ := Advantages(rewards, 4, ScaleGroup)
	fmt.Printf("%.4f\n", st.Advantages)
	fmt.Printf("frac_reward_zero_std=%.2f\n", st.FracRewardZeroStd)
	// Output:
	// [-1.1116 1.2286 -0.4095 0.2925 0.0000 0.0000 0.0000 0.0000]
	// frac_reward_zero_std=0.50
}
