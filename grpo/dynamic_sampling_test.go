package grpo_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

// taskReward gives the tasks in constant the same reward for every
// trajectory (a group with zero std); the others are ranked by their tokens,
// so their groups have variance.
type taskReward struct{ constant map[string]bool }

func (taskReward) Name() string { return "task" }
func (r taskReward) Score(ctx context.Context, in *reward.Input) (reward.Score, error) {
	if r.constant[in.Task.ID] {
		return reward.Score{Value: 0.5}, nil
	}
	sum := 0
	for _, id := range in.Trajectory.Tokens[in.Trajectory.PromptLen:] {
		sum += int(id)
	}
	return reward.Score{Value: float64(sum%997) / 997}, nil
}

// runDynamic trains one step of two prompts x two trajectories, in task
// order, and returns the tasks of the trained batch and the step's metrics.
func runDynamic(t *testing.T, dynamic bool, constant ...string) ([]string, map[string]any) {
	t.Helper()
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	tasks, factories := trainerFixture(t)
	cfg := grpo.Default()
	cfg.OutputDir = t.TempDir()
	cfg.MaxSteps = 1
	cfg.PerDeviceTrainBatchSize = 4
	cfg.NumGenerations = 2
	cfg.MaxPromptLength = 256
	cfg.MaxCompletionLength = 8
	cfg.LoggingSteps = 1
	cfg.Temperature = 1.5
	cfg.ShuffleDataset = false
	cfg.DynamicSampling = dynamic
	cfg.DynamicSamplingMaxRounds = 3
	r := taskReward{constant: map[string]bool{}}
	for _, id := range constant {
		r.constant[id] = true
	}
	var trained []string
	tr := &grpo.Trainer{
		Config: &cfg, Model: tinyModel(t, tok, 16), Tokenizer: tok, Template: tpl,
		Tasks: tasks, Sandboxes: factories, Rewards: []reward.Func{r}, Weights: []float64{1},
		OnGeneration: func(step int, trajs []*chat.Trajectory, rewards []float64) {
			for _, tj := range trajs {
				id := taskOf(t, tok, tasks, tj)
				if len(trained) == 0 || trained[len(trained)-1] != id {
					trained = append(trained, id)
				}
			}
		},
	}
	if err := tr.Train(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	return trained, readMetrics(t, filepath.Join(cfg.OutputDir, "metrics.jsonl"))[0]
}

// taskOf names the task whose prompt tj was sampled from.
func taskOf(t *testing.T, tok *tokenizer.Tokenizer, tasks []task.Task, tj *chat.Trajectory) string {
	t.Helper()
	ids := make([]int, tj.PromptLen)
	for i, id := range tj.Tokens[:tj.PromptLen] {
		ids[i] = int(id)
	}
	prompt := tok.Decode(ids)
	for _, tk := range tasks {
		if strings.Contains(prompt, "user\n"+tk.Task+"<|im_end|>") {
			return tk.ID
		}
	}
	t.Fatalf("no task's text in the prompt %q", prompt)
	return ""
}

// dynamic_sampling drops the groups whose rewards all agree and draws the
// next prompts until the batch is full: here rounds of two prompts, the
// first three tasks constant, so round 1 drops quick-001 and quick-002,
// round 2 drops quick-003 and keeps quick-004, round 3 keeps quick-005.
func TestDynamicSamplingRefillsTheBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("rolls out a tiny model")
	}
	trained, m := runDynamic(t, true, "quick-001", "quick-002", "quick-003")
	if want := []string{"quick-004", "quick-005"}; !slices.Equal(trained, want) {
		t.Errorf("trained on %v, want %v", trained, want)
	}
	if got := m["dynamic_sampling/dropped_groups"]; got != 3.0 {
		t.Errorf("dynamic_sampling/dropped_groups = %v, want 3", got)
	}
	// The logged generation metrics cover every group sampled, as TRL logs
	// what the policy generated: rounds of two prompts sample quick-001 to
	// quick-006 (006 arrives after the batch is full and is not trained
	// on), three of the six groups constant at 0.5. The trained batch's
	// mean is logged apart.
	if got := m["frac_reward_zero_std"]; got != 0.5 {
		t.Errorf("frac_reward_zero_std = %v, want 0.5 (3 of the 6 sampled groups constant)", got)
	}
	kept, ok1 := m["dynamic_sampling/kept_reward_mean"].(float64)
	all, ok2 := m["reward"].(float64)
	if !ok1 || !ok2 {
		t.Fatalf("reward %v, dynamic_sampling/kept_reward_mean %v: want both logged", m["reward"], m["dynamic_sampling/kept_reward_mean"])
	}
	// 12 rewards: six of 0.5, the four trained ones (mean kept) and
	// quick-006's two, each in [0, 1).
	if rest := all*12 - 6*0.5 - kept*4; rest < -1e-9 || rest >= 2 {
		t.Errorf("reward %v over every sampled trajectory and kept mean %v leave %v for quick-006's two rewards, want [0, 2)", all, kept, rest)
	}
}

// When dynamic_sampling_max_rounds rounds find no group with variance, the
// batch is filled with the groups dropped first, so the step keeps its
// shape (and teaches nothing).
func TestDynamicSamplingTopsUpAfterMaxRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("rolls out a tiny model")
	}
	all := []string{"quick-001", "quick-002", "quick-003", "quick-004", "quick-005", "quick-006", "quick-007", "quick-008"}
	trained, m := runDynamic(t, true, all...)
	if want := []string{"quick-001", "quick-002"}; !slices.Equal(trained, want) {
		t.Errorf("trained on %v, want the first dropped groups %v", trained, want)
	}
	if got := m["dynamic_sampling/dropped_groups"]; got != 6.0 {
		t.Errorf("dynamic_sampling/dropped_groups = %v, want 6 (3 rounds x 2 prompts)", got)
	}
	if got := m["frac_reward_zero_std"]; got != 1.0 {
		t.Errorf("frac_reward_zero_std = %v, want 1", got)
	}
}

// Without dynamic_sampling the first prompts are trained as drawn, constant
// or not, and no dynamic_sampling metric is logged.
func TestWithoutDynamicSamplingConstantGroupsAreKept(t *testing.T) {
	if testing.Short() {
		t.Skip("rolls out a tiny model")
	}
	trained, m := runDynamic(t, false, "quick-001")
	if want := []string{"quick-001", "quick-002"}; !slices.Equal(trained, want) {
		t.Errorf("trained on %v, want %v", trained, want)
	}
	if _, ok := m["dynamic_sampling/dropped_groups"]; ok {
		t.Errorf("dynamic_sampling/dropped_groups logged without dynamic_sampling: %v", m)
	}
	if got := m["frac_reward_zero_std"]; got != 0.5 {
		t.Errorf("frac_reward_zero_std = %v, want 0.5 (quick-001's group)", got)
	}
}
