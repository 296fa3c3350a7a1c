package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/model"
)

// TestModelInitCommand: `model init` writes a loadable HF directory whose weights depend only on the seed, and
// `model info` reads it back; a non-Qwen2 config is refused.
func TestModelInitCommand(t *testing.T) {
	cfg := "../../model/testdata/tied/config.json"
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	for i, seed := range []string{"3", "3", "4"} {
		if out, err := runMcprl(t, "", "model", "init", "--config", cfg, "--out", dirs[i], "--seed", seed); err != nil {
			t.Fatalf("init: %v\n%s", err, out)
		}
	}
	read := func(d string) []byte {
		b, err := os.ReadFile(filepath.Join(d, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(read(dirs[0]), read(dirs[1])) {
		t.Errorf("same seed gave different weights")
	}
	if bytes.Equal(read(dirs[0]), read(dirs[2])) {
		t.Errorf("different seeds gave the same weights")
	}
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(backend, dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	// HF init: std initializer_range (0.02) for the embedding.
	emb, _, _ := m.Tensor("model.embed_tokens.weight")
	var ss float64
	for _, v := range emb {
		ss += float64(v) * float64(v)
	}
	if std := (ss / float64(len(emb))); std < 0.015*0.015 || std > 0.025*0.025 {
		t.Errorf("embedding variance %g, want about 0.02^2", std)
	}
	out, err := runMcprl(t, "", "model", "info", dirs[0])
	if err != nil || !strings.Contains(out, "vocab 96") || !strings.Contains(out, "tied true") {
		t.Errorf("info: %v\n%s", err, out)
	}

	bad := filepath.Join(t.TempDir(), "config.json")
	data, _ := os.ReadFile(cfg)
	os.WriteFile(bad, []byte(strings.ReplaceAll(strings.ReplaceAll(string(data), "Qwen2ForCausalLM", "GemmaForCausalLM"), `"qwen2"`, `"gemma"`)), 0o644)
	if _, err := runMcprl(t, "", "model", "init", "--config", bad, "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("gemma config: err = %v", err)
	}
}
