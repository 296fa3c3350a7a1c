package sft

import (
	"context"
	"fmt"
	"io"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/task"
)

// NewTrainer builds the Trainer of cfg over its loaded inputs, as `mcprl sft` runs it: it attaches cfg's LoRA
// adapter to the model (train.PeftArguments.Attach; an adapter the model already has is kept), writes the task
// lines skipped at load to cfg.OutputDir, and tokenizes the golden trajectories of the tasks that have one
// (Demonstrated, Examples), noting on log how many tasks it left out. Attach errors name configPath; it fails
// when no task has a golden trajectory.
func NewTrainer(ctx context.Context, cfg *Config, configPath string, ws *inputs.Loaded, log io.Writer) (*Trainer, error) {
	if err := cfg.PeftArguments.Attach(ws.Model, ws.ModelDir, cfg.Seed, log); err != nil {
		return nil, fmt.Errorf("%s: %w", configPath, err)
	}
	if err := ws.WriteSkipped(cfg.OutputDir); err != nil {
		return nil, err
	}
	jobs, skipped := Demonstrated(ws.Jobs())
	if skipped > 0 {
		fmt.Fprintf(log, "sft: skipped %d of %d tasks without a golden trajectory (%s)\n", skipped, len(ws.Tasks), cfg.Tasks)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("sft: none of the %d tasks in %s has a golden trajectory", len(ws.Tasks), cfg.Tasks)
	}
	examples, err := Examples(ctx, ws.Tokenizer, ws.Template, jobs, cfg.MaxPromptLength, cfg.MaxCompletionLength)
	if err != nil {
		return nil, err
	}
	return &Trainer{Config: cfg, Model: ws.Model, TokenizerDir: ws.ModelDir, Examples: examples, Progress: log,
		SystemPrompt: task.SharedSystemPrompt(ws.Tasks)}, nil
}
