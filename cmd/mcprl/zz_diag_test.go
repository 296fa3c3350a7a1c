package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/reward"
)

func TestZZDiag(t *testing.T) {
	cfgPath := os.Getenv("DIAG_CONFIG")
	if cfgPath == "" {
		t.Skip()
	}
	cfg, err := grpo.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OutputDir = os.Getenv("DIAG_OUT")
	ctx := context.Background()
	ws, err := load(ctx, "../../"+cfg.Model, "../../"+cfg.Tasks, "../../"+cfg.Fixtures, "", false, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := reward.NewRegistry().New("seed")
	os.MkdirAll(cfg.OutputDir, 0o755)
	out, _ := os.Create(cfg.OutputDir + "/trajs.jsonl")
	defer out.Close()
	enc := json.NewEncoder(out)
	tr := &grpo.Trainer{Config: cfg, Model: ws.model, Tokenizer: ws.tok, Template: ws.tpl, TokenizerDir: ws.modelDir,
		Tasks: ws.tasks, Sandboxes: ws.factories, Rewards: []reward.Func{f}, Weights: []float64{1},
		OnGeneration: func(step int, trajs []*chat.Trajectory, rewards []float64) {
			for i, x := range trajs {
				n := 0
				for _, m := range x.Mask {
					n += int(m)
				}
				enc.Encode(map[string]any{"step": step + 1, "i": i, "reward": rewards[i], "trunc": x.Truncated,
					"sampled": n, "len": len(x.Tokens) - x.PromptLen, "text": x.Completion(), "turns": len(x.Turns)})
			}
		}}
	if err := tr.Train(ctx, false); err != nil {
		t.Fatal(err)
	}
}
