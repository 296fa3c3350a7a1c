package sft_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/sft"
)

// A gradient_accumulation_steps sft cannot honour is refused with the file
// and line, never ignored.
func TestLoadRefusesGradientAccumulation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sft.yaml")
	for _, tc := range []struct {
		steps string
		ok    bool
	}{{"1", true}, {"4", false}} {
		body := "learning_rate: 0.001\ngradient_accumulation_steps: " + tc.steps + "\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := sft.Load(path)
		if tc.ok {
			if err != nil {
				t.Errorf("gradient_accumulation_steps %s: %v", tc.steps, err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("gradient_accumulation_steps %s accepted", tc.steps)
		}
		for _, want := range []string{path + ":2:", "gradient_accumulation_steps 4", "per_device_train_batch_size"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		}
	}
}

// sampling_engine is GRPO's: sft has no sampling phase and refuses it, naming the key and its line.
func TestLoadRefusesSamplingEngine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sft.yaml")
	if err := os.WriteFile(path, []byte("learning_rate: 0.001\nsampling_engine: simplego\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := sft.Load(path)
	if err == nil || !strings.Contains(err.Error(), path+`:2: sampling_engine "simplego": sft has no sampling phase`) {
		t.Errorf("sampling_engine in an sft config: %v", err)
	}
}
