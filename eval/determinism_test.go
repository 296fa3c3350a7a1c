package eval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/tokenizer"
)

// tinyModel is a real Qwen2 of random weights over the small tokenizer's
// vocabulary, small enough for unit tests.
func tinyModel(t testing.TB, seed uint64) *model.Model {
	t.Helper()
	tok, _ := smallTokenizer(t)
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	eos, ok := tok.TokenID("<|im_end|>")
	if !ok {
		t.Fatal("no <|im_end|>")
	}
	cfg := model.TinyConfig(tokenizer.SmallVocabSize, -1, eos)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 64, 128, 1
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 4, 2
	m, err := model.New(backend, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDeterministicUnderSeed: sampling a real (tiny, random) model, the same
// seed gives byte-identical trajectories and report, a different seed
// different trajectories.
func TestDeterministicUnderSeed(t *testing.T) {
	tasks, factories := loadTasks(t, heldoutTasks, "")
	tasks = tasks[6:9] // one customers task, two library tasks
	tok, tpl := smallTokenizer(t)
	m := tinyModel(t, 3)
	run := func(seed int64) ([]byte, []byte) {
		cfg := eval.Config{
			Samples: 2, K: 2, MaxPromptLength: 192, MaxCompletionLength: 40, MaxToolCallingIterations: 1,
			Sample: policy.SampleOptions{Temperature: 1, TopP: 1, Seed: seed}, BatchSize: 4, // two batches
		}
		ev := &eval.Evaluator{
			Policy: eval.Sampled(m, cfg), Tokenizer: tok, Template: tpl,
			Sandboxes: factories, Config: cfg,
		}
		res, err := ev.Run(context.Background(), tasks)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 6 {
			t.Fatalf("%d samples", len(res))
		}
		var traj bytes.Buffer
		if err := eval.WriteJSONL(&traj, res); err != nil {
			t.Fatal(err)
		}
		rep, err := eval.Summarize(res, 2)
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return traj.Bytes(), js
	}
	t1, r1 := run(7)
	t2, r2 := run(7)
	if !bytes.Equal(t1, t2) || !bytes.Equal(r1, r2) {
		t.Errorf("same seed, different results:\n%s\n%s", r1, r2)
	}
	t3, _ := run(8)
	if bytes.Equal(t1, t3) {
		t.Error("seeds 7 and 8 sampled identical trajectories")
	}
	// Samples of one task differ from each other (each has its own stream).
	lines := bytes.Split(bytes.TrimSpace(t1), []byte("\n"))
	var a, b eval.Record
	if json.Unmarshal(lines[0], &a) != nil || json.Unmarshal(lines[1], &b) != nil {
		t.Fatal("bad JSONL")
	}
	if a.TaskID != b.TaskID || a.Sample != 0 || b.Sample != 1 || a.Turns[0].Text == b.Turns[0].Text {
		t.Errorf("samples of one task: %+v / %+v", a, b)
	}
}
