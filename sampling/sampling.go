package sampling

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcprl/mcprl/policy"
)

// StateFile is the file of a model folder written by training that holds
// the settings (under "generation"): train.StateFile.
const StateFile = "trainer_state.json"

// Settings are how a policy samples and runs its tools, with TRL's names.
// A model folder that training wrote carries the ones it was trained with.
type Settings struct {
	Temperature float64 `json:"temperature"` // 0: greedy
	TopP        float64 `json:"top_p"`       // 1 (or 0): no nucleus filtering
	TopK        int     `json:"top_k"`       // 0: no top-k filtering
	// MaxPromptLength keeps this many prompt tokens, from the left; 0: all.
	MaxPromptLength int `json:"max_prompt_length"`
	// MaxCompletionLength bounds a trajectory's sampled plus tool-output
	// tokens (a completion's new tokens where there are no tools).
	MaxCompletionLength int `json:"max_completion_length"`
	// MaxToolCallingIterations bounds the rounds of tool execution; nil is
	// TRL's None (no limit given).
	MaxToolCallingIterations *int `json:"max_tool_calling_iterations"`
	// SystemPrompt is the system message the model was trained with, when
	// every training task had the same one; "" when none or they differ.
	SystemPrompt string `json:"system_prompt,omitempty"`

	// keys are the JSON keys Load found; nil: every one (settings made in
	// code). A trainer that does not sample (SFT) records only some.
	keys map[string]bool
}

// Has reports whether s holds the setting of JSON key (such as
// "temperature"): always for settings made in code, and for loaded ones
// when the file had the key.
func (s *Settings) Has(key string) bool { return s.keys == nil || s.keys[key] }

// JSONOf returns s as JSON with only the given keys (JSON names): what a
// trainer records that sets only some, as SFT records its token budgets and
// system prompt but no sampling settings.
func (s *Settings) JSONOf(keys ...string) (json.RawMessage, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for _, k := range keys {
		if v, ok := all[k]; ok {
			out[k] = v
		} else if k != "system_prompt" {
			return nil, fmt.Errorf("sampling: no setting %q", k)
		}
	}
	return json.Marshal(out)
}

// Load reads the settings a model folder was trained with (its
// trainer_state.json's "generation"); nil, nil when it has none (a model
// that training did not write, or one written before the settings were
// recorded).
func Load(modelDir string) (*Settings, error) {
	path := filepath.Join(modelDir, StateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st struct {
		Generation json.RawMessage `json:"generation"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(st.Generation) == 0 || string(st.Generation) == "null" {
		return nil, nil
	}
	s := &Settings{}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(st.Generation, s); err != nil {
		return nil, fmt.Errorf("%s: generation: %w", path, err)
	}
	if err := json.Unmarshal(st.Generation, &keys); err != nil {
		return nil, fmt.Errorf("%s: generation: %w", path, err)
	}
	s.keys = map[string]bool{}
	for k := range keys {
		s.keys[k] = true
	}
	return s, nil
}

// Iterations returns MaxToolCallingIterations, or def when it is nil.
func (s *Settings) Iterations(def int) int {
	if s.MaxToolCallingIterations == nil {
		return def
	}
	return *s.MaxToolCallingIterations
}

// SampleOptions returns the policy's sampling knobs of s with seed.
func (s *Settings) SampleOptions(seed int64) policy.SampleOptions {
	return policy.SampleOptions{Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK, Seed: seed}
}

// String is the line a command prints to say how it samples:
// "temperature 0.6, top_p 1, top_k 0, max_prompt_length 512,
// max_completion_length 192, max_tool_calling_iterations 2" (the
// iterations "none" when nil). The system prompt is not in it.
func (s *Settings) String() string {
	iters := "none"
	if s.MaxToolCallingIterations != nil {
		iters = fmt.Sprint(*s.MaxToolCallingIterations)
	}
	return fmt.Sprintf("temperature %g, top_p %g, top_k %d, max_prompt_length %d, max_completion_length %d, max_tool_calling_iterations %s",
		s.Temperature, s.TopP, s.TopK, s.MaxPromptLength, s.MaxCompletionLength, iters)
}

// HFGenerationConfig returns generation_config.json (raw, possibly empty)
// with Hugging Face's sampling keys set from s: do_sample, temperature,
// top_p, top_k and max_new_tokens. Other keys (token ids) are kept.
func (s *Settings) HFGenerationConfig(raw json.RawMessage) (json.RawMessage, error) {
	m := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("generation_config.json: %w", err)
		}
	}
	m["do_sample"] = s.Temperature > 0
	m["temperature"] = s.Temperature
	m["top_p"] = s.TopP
	m["top_k"] = s.TopK
	if s.MaxCompletionLength > 0 {
		m["max_new_tokens"] = s.MaxCompletionLength
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// DefaultIterations is the rounds of tool execution a command samples with
// when neither it nor the settings under it set them.
const DefaultIterations = 4

// Given returns s holding only the settings of keys (JSON names, such as
// "top_p"): those a command's flags gave, which Resolve lays over the
// others.
func Given(s Settings, keys ...string) *Settings {
	s.keys = map[string]bool{}
	for _, k := range keys {
		s.keys[k] = true
	}
	return &s
}

// Resolve returns the settings a command samples with: def (the command's
// defaults), then every setting base holds when base is not nil, else every
// setting the model in modelDir was trained with when it has them (modelDir
// "": none), then every setting flags holds (Given; nil: none). A trainer
// that does not sample records only some (Has); the others stay def's, and
// MaxToolCallingIterations is DefaultIterations when nothing sets it. from
// is the trainer_state.json the trained settings came from ("" when none
// did).
func Resolve(def Settings, base *Settings, modelDir string, flags *Settings) (s Settings, from string, err error) {
	s = def
	if base == nil && modelDir != "" {
		if base, err = Load(modelDir); err != nil {
			return s, "", fmt.Errorf("sampling: %w", err)
		}
		if base != nil {
			from = filepath.Join(modelDir, StateFile)
		}
	}
	s.over(base)
	s.over(flags)
	if s.MaxToolCallingIterations == nil {
		n := DefaultIterations
		s.MaxToolCallingIterations = &n
	}
	return s, from, nil
}

// over sets in s every setting o holds (Has), o nil holding none; a nil
// MaxToolCallingIterations (TRL's None) leaves s's.
func (s *Settings) over(o *Settings) {
	if o == nil {
		return
	}
	for key, apply := range map[string]func(){
		"temperature":           func() { s.Temperature = o.Temperature },
		"top_p":                 func() { s.TopP = o.TopP },
		"top_k":                 func() { s.TopK = o.TopK },
		"max_prompt_length":     func() { s.MaxPromptLength = o.MaxPromptLength },
		"max_completion_length": func() { s.MaxCompletionLength = o.MaxCompletionLength },
		"max_tool_calling_iterations": func() {
			if o.MaxToolCallingIterations != nil {
				s.MaxToolCallingIterations = o.MaxToolCallingIterations
			}
		},
		"system_prompt": func() { s.SystemPrompt = o.SystemPrompt },
	} {
		if o.Has(key) {
			apply()
		}
	}
}
