package grpo_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcprl/mcprl/grpo"
)

// TestExampleConfigs: every train config shipped under examples/ (a YAML file whose first line is
// "# mcprl train ...") loads and validates, so a README command that names one cannot fail on its config.
// sft's test loads the "# mcprl sft" ones.
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
		switch {
		case bytes.HasPrefix(data, []byte("# mcprl sft ")):
			continue
		case !bytes.HasPrefix(data, []byte("# mcprl train ")):
			continue // not a config of mcprl train or sft (a verl tool config, ...)
		}
		n++
		c, err := grpo.Load(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		if _, err := c.RewardFuncs(); err != nil {
			t.Errorf("%s: %v", p, err) // a reward name the registry does not know
		}
	}
	if n < 2 {
		t.Errorf("found %d train configs in %v, want examples/customers/quick.yaml and examples/experiment/grpo.yaml at least", n, paths)
	}
}
