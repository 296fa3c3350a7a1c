package grpo_test

import (
	"path/filepath"
	"testing"

	"github.com/mcprl/mcprl/grpo"
)

// TestExampleConfigs: every mcprl YAML config shipped under examples/ loads and validates, so a README command
// that names one cannot fail on its config. examples/verl holds verl's own tool configuration, not mcprl's.
func TestExampleConfigs(t *testing.T) {
	paths, err := filepath.Glob("../examples/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kept := paths[:0]
	for _, p := range paths {
		if filepath.Base(filepath.Dir(p)) != "verl" {
			kept = append(kept, p)
		}
	}
	paths = kept
	if len(paths) < 5 {
		t.Fatalf("found %d example configs: %v", len(paths), paths)
	}
	for _, p := range paths {
		c, err := grpo.Load(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
