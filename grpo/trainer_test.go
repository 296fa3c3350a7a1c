package grpo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

// trainerFixture loads the example tasks and a sandbox factory for them.
func trainerFixture(t *testing.T) ([]task.Task, map[string]*sandbox.Factory) {
	t.Helper()
	fixtures, err := task.LoadFixtures("../examples/fixtures")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := task.Load("../examples/customers/quick_tasks.jsonl", task.LoadOptions{Fixtures: fixtures})
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandbox.NewFactory(context.Background(), fixtures["customers"], sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return tasks, map[string]*sandbox.Factory{"customers": f}
}

// tinyModel makes a small random Qwen2 whose vocabulary is tok's.
func tinyModel(t *testing.T, tok *tokenizer.Tokenizer, hidden int) *model.Model {
	t.Helper()
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.TinyConfig(tok.VocabSize(), -1, tok.EOS())
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.NumKeyValueHeads = hidden, 2*hidden, 1, 2, 1
	pad := tok.PadID()
	cfg.PadTokenID = &pad
	m, err := model.New(backend, cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The real-model path: a tiny random Qwen2 over the full 151,665-id Qwen2.5
// vocabulary runs GRPO steps with the real tokenizer and chat template, against
// the live sandbox, and writes a checkpoint that loads back.
func TestTrainerFullQwenTokenizer(t *testing.T) {
	tok, err := tokenizer.Load("../tokenizer/testdata/qwen2.5")
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() < 151_000 {
		t.Fatalf("vocabulary %d: want the full Qwen2.5 tokenizer", tok.VocabSize())
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	tasks, factories := trainerFixture(t)
	m := tinyModel(t, tok, 16)

	cfg := grpo.Default()
	cfg.OutputDir = t.TempDir()
	cfg.MaxSteps = 2
	cfg.PerDeviceTrainBatchSize = 2
	cfg.GradientAccumulationSteps = 1
	cfg.NumGenerations = 2
	cfg.MaxPromptLength = 256
	cfg.MaxCompletionLength = 12
	cfg.LoggingSteps = 1
	cfg.SaveSteps = 1
	cfg.LearningRate = 1e-3
	var gens [][]*chat.Trajectory
	tr := &grpo.Trainer{
		Config: &cfg, Model: m, Tokenizer: tok, Template: tpl, TokenizerDir: "../tokenizer/testdata/qwen2.5",
		Tasks: tasks, Sandboxes: factories,
		Rewards: []reward.Func{reward.NewMCPReward(reward.DefaultMCPRewardConfig())}, Weights: []float64{1},
		OnGeneration: func(step int, trajs []*chat.Trajectory, rewards []float64) { gens = append(gens, trajs) },
	}
	before, _, err := m.Tensor("model.layers.0.mlp.up_proj.weight")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Train(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if len(gens) != 2 {
		t.Fatalf("%d generation batches, want 2", len(gens))
	}
	for _, tj := range gens[0] {
		if tj.PromptLen == 0 || len(tj.Tokens) <= tj.PromptLen {
			t.Errorf("trajectory with %d tokens, prompt %d: nothing sampled", len(tj.Tokens), tj.PromptLen)
		}
		for i, id := range tj.Tokens {
			if int(id) >= tok.VocabSize() {
				t.Fatalf("token %d = %d outside the vocabulary", i, id)
			}
		}
	}
	recs := readMetrics(t, filepath.Join(cfg.OutputDir, "metrics.jsonl"))
	if len(recs) != 2 {
		t.Fatalf("%d metrics lines, want 2", len(recs))
	}
	for _, key := range []string{"step", "epoch", "loss", "reward", "reward_std", "frac_reward_zero_std",
		"completion_length", "clip_ratio/region_mean", "learning_rate", "grad_norm", "rewards/compute_mcp_reward/mean",
		"tools/call_frequency"} {
		if _, ok := recs[0][key]; !ok {
			t.Errorf("metrics lack %q: %v", key, recs[0])
		}
	}
	loaded, err := model.Load(m.Backend, filepath.Join(cfg.OutputDir, "final"))
	if err != nil {
		t.Fatal(err)
	}
	after, _, err := loaded.Tensor("model.layers.0.mlp.up_proj.weight")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokenizer.Load(filepath.Join(cfg.OutputDir, "final")); err != nil {
		t.Errorf("final/ lacks a loadable tokenizer: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.OutputDir, "checkpoint-1", "optimizer.safetensors")); err != nil {
		t.Errorf("checkpoint-1: %v", err)
	}
	// A step with nonzero advantages moves the weights; with every group's
	// rewards equal the loss and gradient are zero and nothing moves.
	moved := false
	for i := range before {
		if before[i] != after[i] {
			moved = true
			break
		}
	}
	anySignal := false
	for _, r := range recs {
		if v, ok := r["frac_reward_zero_std"].(float64); ok && v < 1 {
			anySignal = true
		}
	}
	if anySignal != moved {
		t.Errorf("weights moved = %v, but some group had reward variance = %v", moved, anySignal)
	}
}

func readMetrics(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// With a reward that ranks the trajectories of each group, a GRPO step with
// gradient accumulation over two micro-batches has a finite loss and a
// nonzero gradient.
func TestTrainerStepIsFinite(t *testing.T) {
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
	cfg.GradientAccumulationSteps = 2
	cfg.NumGenerations = 4
	cfg.MaxPromptLength = 256
	cfg.MaxCompletionLength = 16
	cfg.LoggingSteps = 1
	cfg.Temperature = 1.5
	tr := &grpo.Trainer{
		Config: &cfg, Model: tinyModel(t, tok, 32), Tokenizer: tok, Template: tpl,
		Tasks: tasks, Sandboxes: factories,
		// Completion length ranks trajectories, so groups have variance.
		Rewards: []reward.Func{lengthReward{}}, Weights: []float64{1},
	}
	if err := tr.Train(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	recs := readMetrics(t, filepath.Join(cfg.OutputDir, "metrics.jsonl"))
	for _, key := range []string{"loss", "grad_norm"} {
		v, ok := recs[0][key].(float64)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Errorf("%s = %v", key, recs[0][key])
		}
	}
	if g := recs[0]["grad_norm"].(float64); g == 0 {
		t.Errorf("grad_norm 0 with rewards that differ within groups (frac_reward_zero_std %v)", recs[0]["frac_reward_zero_std"])
	}
}

// lengthReward scores a trajectory by the length of its text, a reward with
// variance inside every group of a random policy.
type lengthReward struct{}

func (lengthReward) Name() string { return "length" }
func (lengthReward) Score(ctx context.Context, in *reward.Input) (reward.Score, error) {
	return reward.Score{Value: float64(len(in.Trajectory.Completion())) / 100}, nil
}
