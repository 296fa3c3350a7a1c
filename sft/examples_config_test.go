package sft_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcprl/mcprl/sft"
)

// TestExampleConfigs: every sft config shipped under examples/ (first line "# mcprl sft ...") loads and
// validates, with no GRPO key in it.
func TestExampleConfigs(t *testing.T) {
	paths, err := filepath.Glob("../examples/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("# mcprl sft ")) {
			continue
		}
		n++
		if _, err := sft.Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if n < 2 {
		t.Errorf("found %d sft configs, want examples/customers/base.yaml and examples/experiment/sft.yaml", n)
	}
}

// TestGRPOKeysRefused: a GRPO-only key in an sft config is an error naming
// its line, not silently ignored.
func TestGRPOKeysRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sft.yaml")
	if err := os.WriteFile(p, []byte("output_dir: out\nnum_generations: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sft.Load(p); err == nil || !bytes.Contains([]byte(err.Error()), []byte(p+":2: unknown key \"num_generations\"")) {
		t.Errorf("error %v, want the unknown key named with its line", err)
	}
}
