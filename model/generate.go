package model

import (
	"context"
	"fmt"
	"time"
)

// Generate samples a continuation of each prompt, all prompts as one batch in one KV-cache session drawing from
// seed (sequence i from its own stream, as in NewSession), and returns one Completion per prompt: at most
// opts.MaxNewTokens tokens each, ending at a stop id. Temperature 0 is greedy decoding.
func (m *Model) Generate(ctx context.Context, prompts [][]int, opts SampleOptions, seed uint64) ([]Completion, error) {
	if len(prompts) == 0 {
		return nil, fmt.Errorf("generate: no prompts")
	}
	if opts.MaxNewTokens <= 0 {
		return nil, fmt.Errorf("generate: max new tokens %d, want at least 1", opts.MaxNewTokens)
	}
	longest := 0
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("generate: prompt %d is empty", i)
		}
		longest = max(longest, len(p))
	}
	s, err := m.NewSession(len(prompts), feedSlots(longest)+opts.MaxNewTokens+1, seed)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.Append(ctx, prompts); err != nil {
		return nil, err
	}
	return s.Generate(ctx, opts)
}

// GenerateTimed runs Generate repeat times (at least 1) and returns the last run's completions with each
// run's wall time in seconds, prompt and sampling (the first also compiles the graphs): what
// `mcprl model generate --repeat` times.
func (m *Model) GenerateTimed(ctx context.Context, prompts [][]int, opts SampleOptions, seed uint64, repeat int) ([]Completion, []float64, error) {
	if repeat < 1 {
		return nil, nil, fmt.Errorf("generate: repeat %d: want at least 1", repeat)
	}
	var comps []Completion
	var seconds []float64
	for range repeat {
		start := time.Now()
		var err error
		if comps, err = m.Generate(ctx, prompts, opts, seed); err != nil {
			return nil, nil, err
		}
		seconds = append(seconds, time.Since(start).Seconds())
	}
	return comps, seconds, nil
}
