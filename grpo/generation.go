package grpo

import (
	"github.com/mcprl/mcprl/sampling"
)

// Generation is how a policy trained by GRPO samples and runs its tools:
// the settings it was trained with, recorded in every checkpoint and final/
// (trainer_state.json's "generation", read by sampling.Load; the sampling
// keys also go into generation_config.json with Hugging Face's names), so
// that sampling the folder (chat, generate, eval, tasks distill) does as
// training did.
type Generation = sampling.Settings

// Sampling returns the generation settings of c (without a system prompt:
// that comes from the tasks).
func (c *Config) Sampling() *Generation {
	return &Generation{
		Temperature: c.Temperature, TopP: c.TopP, TopK: c.TopK,
		MaxPromptLength: c.MaxPromptLength, MaxCompletionLength: c.MaxCompletionLength,
		MaxToolCallingIterations: c.MaxToolCallingIterations,
	}
}
