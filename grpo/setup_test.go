package grpo_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/train"
)

// TestNewTrainer: NewTrainer over the quick example's tasks and a tiny random model attaches the config's LoRA
// adapter, makes the configured rewards with their weights, loads the config's model as the reference when
// beta > 0 (and none at beta 0), writes the task lines skipped at load to the output dir, and names the config
// file when a reward is unknown.
func TestNewTrainer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	eb, err := model.OpenEngine(model.EngineSimpleGo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eb.Backend.Finalize)
	mc := model.TinyConfig(2048, -1, 2)
	mc.HiddenSize, mc.IntermediateSize, mc.NumHiddenLayers, mc.NumAttentionHeads, mc.NumKeyValueHeads = 32, 64, 1, 2, 1
	m, err := model.New(eb.Backend, mc, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(modelDir, model.SaveOptions{TokenizerDir: "../tokenizer/small/qwen2.5-2048"}); err != nil {
		t.Fatal(err)
	}
	quick, err := os.ReadFile("../examples/customers/quick_tasks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tasks := filepath.Join(dir, "tasks.jsonl") // the quick example's tasks and a bad line
	if err := os.WriteFile(tasks, append(quick, "{not json\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	newTrainer := func(edit func(*grpo.Config)) (*grpo.Trainer, string, error) {
		cfg := grpo.Default()
		cfg.OutputDir = filepath.Join(dir, "out")
		cfg.Inputs = train.Inputs{Model: modelDir, Tasks: tasks, Fixtures: "../examples/fixtures", Engine: model.EngineSimpleGo}
		cfg.Rewards = []grpo.RewardSpec{{Name: "compute_mcp_reward", Weight: 0.5}, {Name: "format", Weight: 2}}
		edit(&cfg)
		ws, err := inputs.Load(ctx, inputs.Options{Inputs: cfg.Inputs, SkipBad: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		var log bytes.Buffer
		tr, err := grpo.NewTrainer(&cfg, "train.yaml", ws, &log)
		return tr, log.String(), err
	}

	tr, log, err := newTrainer(func(c *grpo.Config) { c.UsePeft = true })
	if err != nil {
		t.Fatal(err)
	}
	if tr.Model.LoRA() == nil || !strings.Contains(log, "LoRA: r 16") || tr.Ref != nil || tr.TokenizerDir != modelDir || len(tr.Tasks) != 8 {
		t.Errorf("LoRA %v, log %q, reference %v, tokenizer dir %q, %d tasks: want attached, the LoRA line, none, %s, 8",
			tr.Model.LoRA(), log, tr.Ref, tr.TokenizerDir, len(tr.Tasks), modelDir)
	}
	if len(tr.Rewards) != 2 || tr.Rewards[0].Name() != "compute_mcp_reward" || len(tr.Weights) != 2 || tr.Weights[0] != 0.5 || tr.Weights[1] != 2 {
		t.Errorf("rewards %v with weights %v: want compute_mcp_reward 0.5 and format 2", tr.Rewards, tr.Weights)
	}

	if tr, _, err = newTrainer(func(c *grpo.Config) { c.Beta = 0.04 }); err != nil {
		t.Fatal(err)
	}
	if tr.Ref == nil || tr.Ref == tr.Model {
		t.Errorf("beta 0.04: reference %p, model %p: want a second copy of the config's model", tr.Ref, tr.Model)
	}

	_, _, err = newTrainer(func(c *grpo.Config) { c.Rewards = []grpo.RewardSpec{{Name: "no_such_reward", Weight: 1}} })
	if err == nil || !strings.HasPrefix(err.Error(), "train.yaml: ") {
		t.Errorf("an unknown reward: error %v, want one naming train.yaml", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "skipped_tasks.txt")); err != nil || !strings.Contains(string(b), "1 bad task line(s) skipped") {
		t.Errorf("skipped_tasks.txt: %q, %v: want the bad line listed", b, err)
	}
}
