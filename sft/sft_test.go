package sft_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/sft"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/taskgen"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
)

// Golden trajectories replayed through the rollout loop against the live
// sandbox, then fine-tuned on: the loss on the assistant's tokens falls, and
// the final model loads back.
func TestTrainLowersLoss(t *testing.T) {
	ctx := context.Background()
	tok, examples := quickExamples(t)
	for _, ex := range examples {
		text := tok.Decode(ex.Tokens)
		if !strings.Contains(text, "<tool_response>") || !strings.Contains(text, "7") {
			t.Errorf("%s: the replayed golden lacks the live tool result:\n%s", ex.TaskID, text)
		}
		var sampled []int
		for i, m := range ex.Mask {
			if m == 1 {
				sampled = append(sampled, ex.Tokens[i])
			}
		}
		if s := tok.Decode(sampled); strings.Contains(s, "<tool_response>") || !strings.Contains(s, "<tool_call>") {
			t.Errorf("%s: loss-masked tokens are not the assistant's: %q", ex.TaskID, s)
		}
	}

	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(backend, tinyConfig(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sft.Default()
	cfg.OutputDir = t.TempDir()
	cfg.MaxSteps = 8
	cfg.PerDeviceTrainBatchSize = 4
	cfg.LearningRate = 1e-2
	cfg.LRSchedulerType = "constant"
	cfg.LoggingSteps = 1
	cfg.SaveSteps = 4
	tr := &sft.Trainer{Config: &cfg, Model: m, TokenizerDir: "../tokenizer/small/qwen2.5-2048", Examples: examples}
	if err := tr.Train(ctx); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(cfg.OutputDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct{ Loss float64 }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, rec.Loss)
	}
	if len(losses) != 8 || losses[7] >= losses[0]*0.8 {
		t.Errorf("losses %v: want 8 steps and the last under 80%% of the first", losses)
	}
	if _, err := model.Load(backend, filepath.Join(cfg.OutputDir, "final")); err != nil {
		t.Errorf("final/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.OutputDir, "checkpoint-4", "trainer_state.json")); err != nil {
		t.Errorf("checkpoint-4: %v", err)
	}
}

// TestDemonstrated keeps the generated tasks that have a golden trajectory
// and counts the edge cases, which carry only assertions, as skipped.
func TestDemonstrated(t *testing.T) {
	fx, err := task.LoadFixture("../examples/fixtures/customers")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := taskgen.Generate(context.Background(), fx, taskgen.Options{N: 45, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]rollout.Job, len(tasks))
	edge := 0
	for i := range tasks {
		jobs[i] = rollout.Job{Task: &tasks[i]}
		if taskgen.IsEdgeCase(tasks[i].Category) {
			edge++
		}
	}
	kept, skipped := sft.Demonstrated(jobs)
	if skipped != edge || len(kept) != len(tasks)-edge || edge == 0 {
		t.Fatalf("kept %d, skipped %d; %d of %d tasks are edge cases", len(kept), skipped, edge, len(tasks))
	}
	for _, j := range kept {
		if _, err := task.GoldenTurns(j.Task, toolcall.RenderCall); err != nil {
			t.Error(err)
		}
	}
}

// tinyConfig is the random model the SFT tests train: a one-layer Qwen2 of width 32 (2 query heads, 1 key-value
// head) over the small tokenizer's vocabulary, <|im_end|> its EOS.
func tinyConfig(t *testing.T) *model.Config {
	t.Helper()
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	mc := model.TinyConfig(tok.VocabSize(), -1, tok.EOS())
	mc.HiddenSize, mc.IntermediateSize, mc.NumHiddenLayers, mc.NumAttentionHeads, mc.NumKeyValueHeads = 32, 64, 1, 2, 1
	return mc
}

// quickExamples are the SFT examples of four of the quick example's tasks (tasks 2-5 of
// examples/customers/quick_tasks.jsonl), their goldens replayed against a live customers sandbox, with the
// small tokenizer they were tokenized with.
func quickExamples(t *testing.T) (*tokenizer.Tokenizer, []sft.Example) {
	t.Helper()
	ctx := context.Background()
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	fixtures, err := task.LoadFixtures("../examples/fixtures")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := task.Load("../examples/customers/quick_tasks.jsonl", task.LoadOptions{Fixtures: fixtures})
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandbox.NewFactory(ctx, fixtures["customers"], sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jobs := make([]rollout.Job, 4)
	for i := range jobs {
		jobs[i] = rollout.Job{Task: &tasks[i+1], Factory: f}
	}
	examples, err := sft.Examples(ctx, tok, tpl, jobs, 512, 512)
	if err != nil {
		t.Fatal(err)
	}
	return tok, examples
}
