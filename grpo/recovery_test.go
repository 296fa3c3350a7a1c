package grpo_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// Branch advantages on hand-computed groups: each continuation against its
// own branch group's mean (and std, Bessel, + 1e-4), a left-out one at 0.
func TestBranchAdvantages(t *testing.T) {
	// Two branch groups of 4: {1, 0, 0, 0} and {0.5, 0.5, NaN, 1}.
	rewards := []float64{1, 0, 0, 0, 0.5, 0.5, math.NaN(), 1}
	// Group 1: mean 0.25, std sqrt((0.5625 + 3 x 0.0625) / 3) = 0.5.
	// Group 2 (NaN left out): mean 2/3, std sqrt((2 x 1/36 + 1/9) / 2) = sqrt(1/12).
	s2 := math.Sqrt(1.0 / 12)
	cases := []struct {
		scale grpo.ScaleRewards
		want  []float64
	}{
		{grpo.ScaleNone, []float64{0.75, -0.25, -0.25, -0.25, -1.0 / 6, -1.0 / 6, 0, 1.0 / 3}},
		{grpo.ScaleGroup, []float64{0.75 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001,
			-1.0 / 6 / (s2 + 1e-4), -1.0 / 6 / (s2 + 1e-4), 0, 1.0 / 3 / (s2 + 1e-4)}},
	}
	for _, c := range cases {
		got, err := grpo.BranchAdvantages(rewards, 4, c.scale)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.want {
			if math.Abs(got[i]-c.want[i]) > 1e-12*math.Max(1, math.Abs(c.want[i])) {
				t.Errorf("scale %s: advantage %d = %v, want %v", c.scale, i, got[i], c.want[i])
			}
		}
	}
	if _, err := grpo.BranchAdvantages(rewards[:7], 4, grpo.ScaleGroup); err == nil {
		t.Error("7 rewards in branch groups of 4: no error")
	}
}

// A run with recovery_branching: the tool-calling model's calls lack their
// arguments, so every trajectory meets a tool error at its first call; the
// trainer branches the roots there, trains the continuations, logs the
// recovery metrics, and writes each branch beside its root in
// completions.jsonl.
func TestRecoveryBranchingTrains(t *testing.T) {
	for _, openerLoss := range []bool{false, true} {
		t.Run(fmt.Sprintf("recovery_forced_opener_loss=%v", openerLoss), func(t *testing.T) { recoveryBranchingTrains(t, openerLoss) })
	}
}

func recoveryBranchingTrains(t *testing.T, openerLoss bool) {
	m, tok, tpl := toolCallingModel(t)
	fx, err := task.LoadFixture("../examples/fixtures/customers")
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandbox.NewFactory(context.Background(), fx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gc := grpo.Default()
	gc.OutputDir, gc.MaxSteps, gc.NumGenerations, gc.PerDeviceTrainBatchSize = t.TempDir(), 2, 2, 2
	gc.MaxCompletionLength, gc.MaxPromptLength, gc.LoggingSteps = 96, 256, 1
	iters := 2
	gc.MaxToolCallingIterations = &iters
	gc.RecoveryBranching, gc.RecoveryGenerations, gc.RecoveryMaxBranchesPerStep = true, 3, 1
	gc.RecoveryForcedCallRatio = 0.5 // round(1.5): 2 of the 3 continuations start with the tool-call opener
	gc.RecoveryForcedOpenerLoss = openerLoss
	if err := gc.Validate(); err != nil {
		t.Fatal(err)
	}
	seed, err := reward.NewRegistry().New("compute_mcp_reward")
	if err != nil {
		t.Fatal(err)
	}
	tr := &grpo.Trainer{Config: &gc, Model: m, Tokenizer: tok, Template: tpl,
		Tasks:     []task.Task{{ID: "t", Task: "How many inactive customers?", Fixture: "customers"}},
		Sandboxes: map[string]*sandbox.Factory{"customers": f}, Rewards: []reward.Func{seed}, Weights: []float64{1}}
	if err := tr.Train(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	for _, line := range readLines(t, filepath.Join(gc.OutputDir, "metrics.jsonl")) {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		if _, ok := row["loss"]; !ok {
			continue
		}
		if row["recovery/branches"] != 1.0 {
			t.Errorf("step %v: recovery/branches = %v, want 1", row["step"], row["recovery/branches"])
		}
		if _, ok := row["recovery/reward_mean"].(float64); !ok {
			t.Errorf("step %v: recovery/reward_mean = %v", row["step"], row["recovery/reward_mean"])
		}
		// The policy's probability of the opener after the setback, logged when the opener trains.
		p, ok := row["recovery/forced_opener_prob"].(float64)
		if ok != openerLoss || ok && !(p > 0 && p <= 1) {
			t.Errorf("step %v: recovery/forced_opener_prob = %v (logged %v), want a probability exactly when the opener trains", row["step"], row["recovery/forced_opener_prob"], ok)
		}
	}
	var roots, branches, forced int
	for _, line := range readLines(t, filepath.Join(gc.OutputDir, "completions.jsonl")) {
		var c struct {
			BranchForced  bool              `json:"branch_forced"`
			Index         int               `json:"index"`
			BranchOf      *int              `json:"branch_of"`
			BranchTurn    int               `json:"branch_turn"`
			BranchTrigger string            `json:"branch_trigger"`
			Turns         []json.RawMessage `json:"turns"`
			Advantage     *float64          `json:"advantage"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatal(err)
		}
		if c.BranchOf == nil {
			roots++
			continue
		}
		branches++
		if *c.BranchOf != 0 || c.Index < 2 || c.BranchTurn != 1 || c.BranchTrigger != "tool_error" || len(c.Turns) < 2 || c.Advantage == nil {
			t.Errorf("branch %+v", c)
		}
		if c.BranchForced {
			forced++
			if len(c.Turns) > c.BranchTurn && !strings.Contains(string(c.Turns[c.BranchTurn]), "tool_call") {
				t.Errorf("forced branch %d: its first own turn %s has no tool-call opener", c.Index, c.Turns[c.BranchTurn])
			}
		}
	}
	if roots != 4 || branches != 6 || forced != 4 {
		t.Errorf("completions.jsonl: %d roots, %d branches, %d forced; want 2 steps x 2, 2 steps x 3, 2 steps x 2", roots, branches, forced)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
