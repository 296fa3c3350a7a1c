package model_test

import (
	"strings"
	"testing"

	"github.com/mcprl/mcprl/model"
)

func TestParseEngine(t *testing.T) {
	for in, want := range map[string]model.Engine{"": model.EngineAuto, "auto": model.EngineAuto, " xla ": model.EngineXLA,
		"simplego": model.EngineSimpleGo, "xla:cuda": "xla:cuda", "xla:/opt/p.so": "xla:/opt/p.so"} {
		if got, err := model.ParseEngine(in); err != nil || got != want {
			t.Errorf("ParseEngine(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"go", "XLA", "xla:", "cuda"} {
		if _, err := model.ParseEngine(in); err == nil || !strings.Contains(err.Error(), model.Engines) {
			t.Errorf("ParseEngine(%q): err %v, want one naming the settings", in, err)
		}
	}
}

// Without a plugin, auto runs on simplego and says why; an explicit xla fails; $GOMLX_BACKEND decides auto.
func TestOpenEngineWithoutPlugin(t *testing.T) {
	t.Setenv("GOMLX_BACKEND", "")
	t.Setenv(model.PluginEnvVar, "/nonexistent/pjrt_c_api_cpu_plugin.so")
	eb, err := model.OpenEngine(model.EngineAuto)
	if err != nil {
		t.Fatal(err)
	}
	line := eb.String()
	if eb.IsXLA() || eb.Fallback == nil || !strings.HasPrefix(line, "engine: simplego (XLA not in use: $MCPRL_PJRT_PLUGIN") ||
		!strings.Contains(line, "scripts/install-xla.sh") || !strings.Contains(line, "matmul: ") {
		t.Errorf("auto without a plugin: %s", line)
	}
	if _, err := model.OpenEngine(model.EngineXLA); err == nil || !strings.Contains(err.Error(), "engine xla") {
		t.Errorf("xla without a plugin: err %v", err)
	}
	eb, err = model.OpenEngine(model.EngineSimpleGo)
	if err != nil || eb.IsXLA() || eb.Fallback != nil || !strings.HasPrefix(eb.String(), "engine: simplego (pure Go)") {
		t.Errorf("simplego: %v, %v", eb, err)
	}
	t.Setenv("GOMLX_BACKEND", "go")
	if eb, err = model.OpenEngine(""); err != nil || eb.IsXLA() || !strings.Contains(eb.String(), "from $GOMLX_BACKEND=go") {
		t.Errorf("auto with GOMLX_BACKEND=go: %v, %v", eb, err)
	}
	t.Setenv("GOMLX_BACKEND", "tpu-thing")
	if _, err = model.OpenEngine(""); err == nil {
		t.Error("auto with an unknown $GOMLX_BACKEND opened")
	}
}
