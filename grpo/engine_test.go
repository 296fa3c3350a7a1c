package grpo_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/internal/enginetest"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/train"
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

// TestGRPOOnEngines: on each engine (enginetest.Engines), GRPO steps of a tiny random Qwen2 over the full
// 151,665-id Qwen2.5 vocabulary (so the log-probs run in chunks of 110 positions) with a LoRA adapter trained
// with dropout and the rows of the tool-call tokens (trainable_token_indices), against the live sandbox: a run of
// two steps, and a run stopped after checkpoint-1 and resumed from it (the model loaded back from the checkpoint
// with its adapter, the optimizer state restored), which must log the uninterrupted run's second step. Both runs
// are on one engine: the comparison asks each engine to be deterministic, not to round as the other does.
func TestGRPOOnEngines(t *testing.T) {
	enginetest.Run(t, func(t *testing.T, engine string) {
		eb, err := model.OpenEngine(model.Engine(engine))
		if err != nil {
			enginetest.Unavailable(t, engine, err)
		}
		t.Cleanup(eb.Backend.Finalize)
		grpoStopAndResume(t, eb, false)
	})
}

// TestGRPOBF16 is TestGRPOOnEngines's run with bf16: true on XLA (the frozen base in bfloat16, the adapter and
// the token rows float32): the steps have a finite loss and a gradient, the checkpoint loads back with its
// adapter, and the resumed run logs the uninterrupted run's second step.
func TestGRPOBF16(t *testing.T) {
	eb, err := model.OpenEngine(model.EngineXLA)
	if err != nil {
		enginetest.Unavailable(t, "xla", err)
	}
	t.Cleanup(eb.Backend.Finalize)
	grpoStopAndResume(t, eb, true)
}

// grpoStopAndResume runs TestGRPOOnEngines's two runs on eb, in bf16 when bf16 is set.
func grpoStopAndResume(t *testing.T, eb *model.EngineBackend, bf16 bool) {
	tokDir := "../tokenizer/testdata/qwen2.5"
	tok, err := tokenizer.Load(tokDir)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	open, ok1 := tok.TokenID("<tool_call>")
	closing, ok2 := tok.TokenID("</tool_call>")
	if !ok1 || !ok2 {
		t.Fatal("no tool-call tokens")
	}
	tasks, factories := trainerFixture(t)
	peft := train.PeftArguments{UsePeft: true, LoraR: 4, LoraAlpha: 8, LoraDropout: 0.1,
		LoraTargetModules: []string{"q_proj", "v_proj", "down_proj"}, TrainableTokens: []int{open, closing}}
	{
		config := func(dir string, steps int) *grpo.Config {
			cfg := grpo.Default()
			cfg.OutputDir, cfg.MaxSteps, cfg.SaveSteps, cfg.LoggingSteps = dir, steps, 1, 1
			cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumGenerations = 2, 1, 2
			cfg.MaxPromptLength, cfg.MaxCompletionLength = 256, 12
			cfg.LearningRate, cfg.LRSchedulerType, cfg.Temperature, cfg.Seed = 1e-2, "constant", 1.5, 3
			cfg.PeftArguments = peft
			cfg.BF16 = bf16
			return &cfg
		}
		run := func(m *model.Model, cfg *grpo.Config, resume bool) {
			t.Helper()
			if err := cfg.PeftArguments.Attach(m, tokDir, cfg.Seed, nil); err != nil {
				t.Fatal(err)
			}
			tr := &grpo.Trainer{Config: cfg, Model: m, Tokenizer: tok, Template: tpl, TokenizerDir: tokDir,
				Tasks: tasks, Sandboxes: factories, Rewards: []reward.Func{lengthReward{}}, Weights: []float64{1}}
			if err := tr.Train(context.Background(), resume); err != nil {
				t.Fatal(err)
			}
		}
		fresh := func() *model.Model {
			cfg := model.TinyConfig(tok.VocabSize(), -1, tok.EOS())
			cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 16, 32, 1, 2, 1
			pad := tok.PadID()
			cfg.PadTokenID = &pad
			m, err := model.New(eb.Backend, cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		// The stopped run's folder is the whole run's checkpoint-1, as a run killed after saving it leaves it.
		whole, stopped := t.TempDir(), t.TempDir()
		run(fresh(), config(whole, 2), false)
		if err := os.CopyFS(filepath.Join(stopped, "checkpoint-1"), os.DirFS(filepath.Join(whole, "checkpoint-1"))); err != nil {
			t.Fatal(err)
		}
		resumed, err := model.Load(eb.Backend, filepath.Join(stopped, "checkpoint-1"))
		if err != nil {
			t.Fatal(err)
		}
		if resumed.LoRA() == nil || len(resumed.LoRA().TrainableTokenIndices) != 2 {
			t.Fatalf("checkpoint-1 lacks the adapter or its token rows: %+v", resumed.LoRA())
		}
		run(resumed, config(stopped, 2), true)
		want, got := readMetrics(t, filepath.Join(whole, "metrics.jsonl")), readMetrics(t, filepath.Join(stopped, "metrics.jsonl"))
		if len(want) != 2 || len(got) != 1 {
			t.Fatalf("%d and %d metrics lines, want 2 and 1", len(want), len(got))
		}
		for _, key := range []string{"step", "loss", "grad_norm", "reward", "completion_length", "learning_rate"} {
			w, wok := want[1][key].(float64)
			g, gok := got[0][key].(float64)
			if !wok || !gok || math.IsNaN(w) || w != g {
				t.Errorf("step 2 %s: resumed %v, uninterrupted %v", key, got[0][key], want[1][key])
			}
		}
		if g, _ := want[1]["grad_norm"].(float64); g == 0 {
			t.Errorf("step 2 had no gradient (frac_reward_zero_std %v): the comparison proves nothing", want[1]["frac_reward_zero_std"])
		}
		if bf16 && (!resumed.BF16() || resumed.LoRA() == nil) {
			t.Errorf("the resumed model: bf16 %v, adapter %v", resumed.BF16(), resumed.LoRA())
		}
		t.Logf("%s (bf16 %v): step 2 loss %v, grad_norm %v, reward %v", eb.Engine, bf16, want[1]["loss"], want[1]["grad_norm"], want[1]["reward"])
	}
}
