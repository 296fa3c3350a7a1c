package grpo_test

import (
	"strings"
	"testing"

	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/model"
)

// The engine key: auto by default, xla and simplego read, anything else an error naming the key and its line.
func TestConfigEngine(t *testing.T) {
	for yaml, want := range map[string]model.Engine{"seed: 1\n": "", "engine: xla\n": model.EngineXLA, "engine: simplego\n": model.EngineSimpleGo, "engine: auto\n": model.EngineAuto} {
		cfg, err := grpo.Parse([]byte(yaml), "c.yaml")
		if err != nil || cfg.Engine != want {
			t.Errorf("%q: engine %q, %v; want %q", yaml, cfg.Engine, err, want)
		}
	}
	if _, err := grpo.Parse([]byte("seed: 1\nengine: gpu\n"), "c.yaml"); err == nil || !strings.Contains(err.Error(), `c.yaml:2: engine "gpu": want one of`) {
		t.Errorf("engine: gpu: %v", err)
	}
}
