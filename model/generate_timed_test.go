package model_test

import (
	"context"
	"slices"
	"testing"

	"github.com/mcprl/mcprl/model"
)

// GenerateTimed runs Generate repeat times, times each run, and returns the last run's completions, which
// equal one Generate's; a repeat under 1 is refused.
func TestGenerateTimed(t *testing.T) {
	m := tinyModel(t)
	ctx := context.Background()
	prompts := [][]int{{3, 4, 5}, {6}}
	opts := model.SampleOptions{Temperature: 1, MaxNewTokens: 4}
	want, err := m.Generate(ctx, prompts, opts, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.GenerateTimed(ctx, prompts, opts, 7, 0); err == nil {
		t.Error("repeat 0 accepted")
	}
	for _, repeat := range []int{1, 3} {
		got, seconds, err := m.GenerateTimed(ctx, prompts, opts, 7, repeat)
		if err != nil {
			t.Fatal(err)
		}
		if len(seconds) != repeat || len(got) != len(want) || !slices.Equal(got[0].Tokens, want[0].Tokens) || !slices.Equal(got[1].Tokens, want[1].Tokens) {
			t.Errorf("repeat %d: %d timings, completions %v, want %d and %v", repeat, len(seconds), got, max(repeat, 1), want)
		}
	}
}
