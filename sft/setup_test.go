package sft_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/sft"
	"github.com/mcprl/mcprl/train"
)

// TestNewTrainer: NewTrainer over the quick example's tasks and a tiny random model attaches the config's LoRA
// adapter, tokenizes every task's golden trajectory and records the system prompt the tasks share; over tasks
// without a golden trajectory it notes them as skipped and fails, naming the tasks file.
func TestNewTrainer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	const tokDir = "../tokenizer/small/qwen2.5-2048"
	eb, err := model.OpenEngine(model.EngineSimpleGo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eb.Backend.Finalize)
	m, err := model.New(eb.Backend, tinyConfig(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(modelDir, model.SaveOptions{TokenizerDir: tokDir}); err != nil {
		t.Fatal(err)
	}
	newTrainer := func(tasks string) (*sft.Trainer, string, error) {
		cfg := sft.Default()
		cfg.OutputDir, cfg.UsePeft = filepath.Join(dir, "out"), true
		cfg.Inputs = train.Inputs{Model: modelDir, Tasks: tasks, Fixtures: "../examples/fixtures", Engine: model.EngineSimpleGo}
		ws, err := inputs.Load(ctx, inputs.Options{Inputs: cfg.Inputs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		var log bytes.Buffer
		tr, err := sft.NewTrainer(ctx, &cfg, "sft.yaml", ws, &log)
		return tr, log.String(), err
	}

	const quick = "../examples/customers/quick_tasks.jsonl"
	tr, log, err := newTrainer(quick)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Examples) != 8 || tr.Model.LoRA() == nil || tr.TokenizerDir != modelDir || tr.SystemPrompt == "" || !strings.Contains(log, "LoRA: r 16") {
		t.Errorf("%d examples, LoRA %v, tokenizer dir %q, system prompt %q, log %q: want 8, attached, %s, the tasks' own, the LoRA line",
			len(tr.Examples), tr.Model.LoRA(), tr.TokenizerDir, tr.SystemPrompt, log, modelDir)
	}

	// The same tasks without their goldens.
	data, err := os.ReadFile(quick)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		delete(rec, "golden")
		b, _ := json.Marshal(rec)
		lines = append(lines, string(b))
	}
	bare := filepath.Join(dir, "bare.jsonl")
	if err := os.WriteFile(bare, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, log, err = newTrainer(bare); err == nil || !strings.Contains(err.Error(), "none of the 8 tasks in "+bare) ||
		!strings.Contains(log, "skipped 8 of 8 tasks without a golden trajectory") {
		t.Errorf("tasks without goldens: %v, log %q; want the error naming %s and the skipped note", err, log, bare)
	}
}
