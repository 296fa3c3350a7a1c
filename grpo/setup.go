package grpo

import (
	"fmt"
	"io"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/train"
)

// RunParts returns the TrainingArguments, the inputs and the ignored keys,
// for train.LoadConfig to put a command's flags over.
func (c *Config) RunParts() (*train.Arguments, *train.Inputs, []string) {
	return &c.Arguments, &c.Inputs, c.Ignored
}

// NewTrainer builds the Trainer of cfg over its loaded inputs, as `mcprl train` runs it: it attaches cfg's LoRA
// adapter to the model (train.PeftArguments.Attach; an adapter the model already has, as a checkpoint's, is
// kept), writes the task lines skipped at load to cfg.OutputDir, makes the reward functions with their weights,
// samples on ws's sampling engine, and loads cfg.Model again as the frozen reference model when beta > 0 (the
// config's model, also when ws holds a checkpoint to resume from). Attach and reward errors name configPath;
// log gets the adapter's line and the run's progress.
func NewTrainer(cfg *Config, configPath string, ws *inputs.Loaded, log io.Writer) (*Trainer, error) {
	if err := cfg.PeftArguments.Attach(ws.Model, ws.ModelDir, cfg.Seed, log); err != nil {
		return nil, fmt.Errorf("%s: %w", configPath, err)
	}
	if err := ws.WriteSkipped(cfg.OutputDir); err != nil {
		return nil, err
	}
	rewards, err := cfg.RewardFuncs()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", configPath, err)
	}
	t := &Trainer{
		Config: cfg, Model: ws.Model, Tokenizer: ws.Tokenizer, Template: ws.Template, TokenizerDir: ws.ModelDir,
		Tasks: ws.Tasks, Sandboxes: ws.Sandboxes, Rewards: rewards, Weights: cfg.RewardWeights(),
		Progress: log, SamplingBackend: ws.SamplingBackend(),
	}
	if cfg.Beta > 0 {
		if t.Ref, err = model.Load(ws.Model.Backend, cfg.Model); err != nil {
			return nil, fmt.Errorf("reference model: %w", err)
		}
	}
	return t, nil
}
