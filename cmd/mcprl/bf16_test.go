package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/model"
)

// TestTrainBF16Flag: --bf16 reaches the trainer: train --bf16 --engine simplego fails saying bf16 needs engine xla
// (the config alone has no bf16, so only the flag can have turned it on). That bf16 trains on XLA is
// grpo.TestGRPOBF16's.
func TestTrainBF16Flag(t *testing.T) {
	var errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"train", "--config", trainConfig(t, 1), "--output-dir", t.TempDir(), "--engine", "simplego", "--bf16"})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&errOut)
	if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), model.ErrBF16SimpleGo.Error()) {
		t.Errorf("train --bf16 --engine simplego: %v, want %q\n%s", err, model.ErrBF16SimpleGo, errOut.String())
	}
}
