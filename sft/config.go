package sft

import (
	"github.com/mcprl/mcprl/train"
)

// Config is what sft reads: the TrainingArguments, what to load, and the
// rollout limits the golden trajectories must fit (TRL SFTConfig's names
// where it has them).
type Config struct {
	train.Arguments `yaml:",inline"`
	train.Inputs    `yaml:",inline"`
	// LoRA (TRL ModelConfig's names).
	train.PeftArguments `yaml:",inline"`
	// MaxPromptLength keeps a prompt's last tokens (0: no limit);
	// MaxCompletionLength bounds a golden trajectory's assistant and tool
	// tokens: a longer one is an error.
	MaxPromptLength     int `yaml:"max_prompt_length"`
	MaxCompletionLength int `yaml:"max_completion_length"`
	// Ignored lists the keys found in the file that change nothing in
	// mcprl, as "key (line N)"; the CLI should mention them.
	Ignored []string `yaml:"-"`
}

var schema = train.Schema{Kind: "TRL SFTConfig", NoEffect: train.NoEffect, Unsupported: train.Unsupported}

// Default returns the defaults: the TrainingArguments GRPO uses (TRL's) and
// GRPO's max_completion_length, 512.
func Default() Config {
	return Config{Arguments: train.DefaultArguments(), PeftArguments: train.DefaultPeftArguments(), MaxCompletionLength: 512}
}

// Load reads a YAML config file over the defaults and validates it.
func Load(path string) (*Config, error) {
	cfg := Default()
	ignored, err := train.ReadFile(path, &cfg, schema)
	if err != nil {
		return nil, err
	}
	cfg.Ignored = ignored
	return &cfg, nil
}

// RunParts returns the TrainingArguments, the inputs and the ignored keys,
// for train.LoadConfig to put a command's flags over.
func (c *Config) RunParts() (*train.Arguments, *train.Inputs, []string) {
	return &c.Arguments, &c.Inputs, c.Ignored
}

// Validate checks the values.
func (c *Config) Validate() error {
	var ck train.Checker
	c.Arguments.Check(&ck)
	c.Inputs.Check(&ck)
	train.CheckBF16(&ck, c.BF16, &c.Inputs)
	c.PeftArguments.Check(&ck)
	if c.SamplingEngine != "" {
		ck.Bad("sampling_engine", "sampling_engine %q: sft has no sampling phase (it trains on engine); sampling_engine is a GRPO (train) key", c.SamplingEngine)
	}
	if c.GradientAccumulationSteps > 1 {
		// Refused rather than ignored: one optimizer step per batch is all
		// sft does, so a value above 1 would silently change the run.
		ck.Bad("gradient_accumulation_steps", "gradient_accumulation_steps %d: mcprl sft takes one optimizer step per batch (only 1 is supported); raise per_device_train_batch_size instead", c.GradientAccumulationSteps)
	}
	if c.MaxPromptLength < 0 {
		ck.Bad("max_prompt_length", "max_prompt_length must be >= 0 (0: no limit), got %d", c.MaxPromptLength)
	}
	if c.MaxCompletionLength < 1 {
		ck.Bad("max_completion_length", "max_completion_length must be >= 1, got %d", c.MaxCompletionLength)
	}
	return ck.Err()
}
