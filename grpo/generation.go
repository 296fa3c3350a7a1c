package grpo

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcprl/mcprl/train"
)

// Generation is how a policy trained by GRPO samples and runs its tools:
// the settings it was trained with. Every checkpoint and final/ carry it
// (trainer_state.json's "generation"; the sampling keys also go into
// generation_config.json with Hugging Face's names), so that evaluating the
// folder samples as training did.
type Generation struct {
	Temperature              float64 `json:"temperature"`
	TopP                     float64 `json:"top_p"`
	TopK                     int     `json:"top_k"`
	MaxPromptLength          int     `json:"max_prompt_length"`
	MaxCompletionLength      int     `json:"max_completion_length"`
	MaxToolCallingIterations *int    `json:"max_tool_calling_iterations"` // nil: TRL's None, no limit
}

// Sampling returns the generation settings of c.
func (c *Config) Sampling() *Generation {
	return &Generation{
		Temperature: c.Temperature, TopP: c.TopP, TopK: c.TopK,
		MaxPromptLength: c.MaxPromptLength, MaxCompletionLength: c.MaxCompletionLength,
		MaxToolCallingIterations: c.MaxToolCallingIterations,
	}
}

// hfGenerationConfig returns generation_config.json (raw, possibly empty)
// with Hugging Face's sampling keys set from g: do_sample, temperature,
// top_p, top_k and max_new_tokens. Other keys (token ids) are kept.
func (g *Generation) hfGenerationConfig(raw json.RawMessage) (json.RawMessage, error) {
	m := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("generation_config.json: %w", err)
		}
	}
	m["do_sample"] = g.Temperature > 0
	m["temperature"] = g.Temperature
	m["top_p"] = g.TopP
	m["top_k"] = g.TopK
	if g.MaxCompletionLength > 0 {
		m["max_new_tokens"] = g.MaxCompletionLength
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// LoadGeneration reads the generation settings a model folder was trained
// with (its trainer_state.json); nil, nil when it has none (a model not
// trained by mcprl's GRPO).
func LoadGeneration(modelDir string) (*Generation, error) {
	data, err := os.ReadFile(filepath.Join(modelDir, train.StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st struct {
		Generation *Generation `json:"generation"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(modelDir, train.StateFile), err)
	}
	return st.Generation, nil
}
