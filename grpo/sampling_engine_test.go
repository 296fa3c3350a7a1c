package grpo_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/internal/enginetest"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/tokenizer"
)

// The sampling_engine key: unset by default, an engine setting read, anything else an error naming the key.
func TestConfigSamplingEngine(t *testing.T) {
	for yaml, want := range map[string]model.Engine{"seed: 1\n": "", "sampling_engine: simplego\n": model.EngineSimpleGo, "sampling_engine: xla:cuda\n": "xla:cuda"} {
		cfg, err := grpo.Parse([]byte(yaml), "c.yaml")
		if err != nil || cfg.SamplingEngine != want {
			t.Errorf("%q: sampling_engine %q, %v; want %q", yaml, cfg.SamplingEngine, err, want)
		}
	}
	_, err := grpo.Parse([]byte("seed: 1\nsampling_engine: vllm\n"), "c.yaml")
	if err == nil || !strings.Contains(err.Error(), `c.yaml:2: sampling_engine "vllm": want one of`) {
		t.Errorf("sampling_engine: vllm: %v", err)
	}
}

// TestSamplingEngine: GRPO trains on one engine and samples on a copy of the weights on another
// (Trainer.SamplingBackend, the config's sampling_engine), for each pair of engines (simplego on two backends
// where XLA is absent). At every generation batch the copy decodes greedily what the trained model does, and
// the trained model's greedy tokens move away from the first batch's: the copy followed the optimizer steps.
func TestSamplingEngine(t *testing.T) {
	const dir = "../examples/customers/base"
	tok, tpl, err := tokenizer.LoadWithTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	tasks, factories := trainerFixture(t)
	engines := enginetest.Engines()
	for _, trainOn := range engines {
		for _, sampleOn := range engines {
			if trainOn == sampleOn && len(engines) > 1 {
				continue
			}
			t.Run(trainOn+"_samples_on_"+sampleOn, func(t *testing.T) {
				open := func(e string) *model.EngineBackend {
					eb, err := model.OpenEngine(model.Engine(e))
					if err != nil {
						enginetest.Unavailable(t, e, err)
					}
					t.Cleanup(eb.Backend.Finalize)
					return eb
				}
				trainer, sampler := open(trainOn), open(sampleOn)
				m, err := model.Load(trainer.Backend, dir)
				if err != nil {
					t.Fatal(err)
				}
				cfg := grpo.Default()
				cfg.OutputDir, cfg.MaxSteps, cfg.SaveSteps, cfg.LoggingSteps = t.TempDir(), 3, 10, 1
				cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumGenerations = 4, 1, 2
				cfg.MaxPromptLength, cfg.MaxCompletionLength = 512, 24
				cfg.LearningRate, cfg.LRSchedulerType, cfg.Seed = 5e-2, "constant", 3
				cfg.PeftArguments.UsePeft, cfg.LoraR, cfg.LoraAlpha = true, 4, 8
				cfg.LoraTargetModules, cfg.TrainableTokens = []string{"q_proj", "v_proj", "down_proj"}, []int{tok.EOS()}
				if err := cfg.PeftArguments.Attach(m, dir, cfg.Seed, nil); err != nil {
					t.Fatal(err)
				}
				var progress bytes.Buffer
				var prompts, first [][]int
				moved := false
				var tr *grpo.Trainer
				tr = &grpo.Trainer{Config: &cfg, Model: m, Tokenizer: tok, Template: tpl, TokenizerDir: dir,
					Tasks: tasks, Sandboxes: factories, Rewards: []reward.Func{lengthReward{}}, Weights: []float64{1},
					SamplingBackend: sampler.Backend, Progress: &progress,
					OnGeneration: func(step int, trajs []*chat.Trajectory, _ []float64) {
						s := tr.SamplingModel()
						if s == m || s.Backend != sampler.Backend {
							t.Fatalf("step %d: the rollouts sample on the training model", step)
						}
						if prompts == nil {
							for _, tj := range trajs[:2] {
								p := make([]int, tj.PromptLen)
								for i, id := range tj.Tokens[:tj.PromptLen] {
									p[i] = int(id)
								}
								prompts = append(prompts, p)
							}
						}
						want, err := m.GreedyNoCache(context.Background(), prompts, 16, nil)
						if err != nil {
							t.Fatal(err)
						}
						if got, err := s.GreedyNoCache(context.Background(), prompts, 16, nil); err != nil || !slices.EqualFunc(got, want, slices.Equal) {
							t.Errorf("step %d: the sampling copy decodes %v (%v), the trained model %v", step, got, err, want)
						}
						if first == nil {
							first = want
						} else if !slices.EqualFunc(want, first, slices.Equal) {
							moved = true
						}
					}}
				if err := tr.Train(context.Background(), false); err != nil {
					t.Fatal(err)
				}
				if !moved {
					t.Errorf("the trained model decodes %v at every step: the comparison proves nothing", first)
				}
				if !strings.Contains(progress.String(), "sampling copy refreshes: 2 (") {
					t.Errorf("summary: %s", progress.String())
				}
			})
		}
	}
}

// The sampling_dtype key: auto, float32 or bfloat16; bfloat16 where the rollouts would sample on simplego, or any
// other value, is an error naming the key.
func TestConfigSamplingDType(t *testing.T) {
	for _, ok := range []string{"seed: 1\n", "sampling_dtype: auto\n", "sampling_dtype: float32\n", "sampling_dtype: bfloat16\n",
		"engine: simplego\nsampling_engine: xla\nsampling_dtype: bfloat16\n"} {
		if _, err := grpo.Parse([]byte(ok), "c.yaml"); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for yaml, want := range map[string]string{
		"seed: 1\nsampling_dtype: fp8\n":                      `sampling_dtype "fp8": want auto, float32 or bfloat16`,
		"engine: simplego\nsampling_dtype: bfloat16\n":        "sampling_dtype: bfloat16 samples on engine simplego",
		"sampling_engine: simplego\nsampling_dtype: bfloat16": "sampling_dtype: bfloat16 samples on engine simplego",
	} {
		if _, err := grpo.Parse([]byte(yaml), "c.yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", yaml, err, want)
		}
	}
}

// TestSamplingDType: with sampling_dtype: bfloat16 a GRPO run trains in float32 on XLA and its rollouts sample on a
// bfloat16 copy of the weights on the same engine, refreshed after every optimizer step; the importance-sampling
// correction sees the gap between the copy's log-probs and the trainer's (ratios other than 1). Where bf16: true
// already runs the LoRA model's frozen weights in bfloat16 there is no copy; float32 then samples on a float32 copy.
func TestSamplingDType(t *testing.T) {
	if !slices.Contains(enginetest.Engines(), "xla") {
		t.Skip("needs engine xla (MCPRL_TEST_ENGINES)")
	}
	const dir = "../examples/customers/base"
	tok, tpl, err := tokenizer.LoadWithTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	tasks, factories := trainerFixture(t)
	for _, c := range []struct {
		dtype          string
		bf16           bool
		steps          int
		copy, copyBF16 bool
	}{
		{"bfloat16", false, 3, true, true},
		{"bfloat16", true, 1, false, true},
		{"float32", true, 1, true, false},
	} {
		t.Run(fmt.Sprintf("%s_bf16_%v", c.dtype, c.bf16), func(t *testing.T) {
			eb, err := model.OpenEngine(model.EngineXLA)
			if err != nil {
				enginetest.Unavailable(t, "xla", err)
			}
			t.Cleanup(eb.Backend.Finalize)
			m, err := model.Load(eb.Backend, dir)
			if err != nil {
				t.Fatal(err)
			}
			cfg := grpo.Default()
			cfg.OutputDir, cfg.MaxSteps, cfg.SaveSteps, cfg.LoggingSteps = t.TempDir(), c.steps, 10, 1
			cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumGenerations = 4, 1, 2
			cfg.MaxPromptLength, cfg.MaxCompletionLength = 512, 24
			cfg.LearningRate, cfg.LRSchedulerType, cfg.Seed = 5e-2, "constant", 3
			cfg.PeftArguments.UsePeft, cfg.LoraR, cfg.LoraAlpha = true, 4, 8
			cfg.LoraTargetModules = []string{"q_proj", "v_proj", "down_proj"}
			cfg.SamplingDType, cfg.BF16 = c.dtype, c.bf16
			if err := cfg.PeftArguments.Attach(m, dir, cfg.Seed, nil); err != nil {
				t.Fatal(err)
			}
			var progress bytes.Buffer
			var tr *grpo.Trainer
			tr = &grpo.Trainer{Config: &cfg, Model: m, Tokenizer: tok, Template: tpl, TokenizerDir: dir,
				Tasks: tasks, Sandboxes: factories, Rewards: []reward.Func{lengthReward{}}, Weights: []float64{1}, Progress: &progress,
				OnGeneration: func(step int, _ []*chat.Trajectory, _ []float64) {
					s := tr.SamplingModel()
					if (s != m) != c.copy || s.Backend != m.Backend || s.BF16() != c.copyBF16 {
						t.Fatalf("step %d: sampling on a copy %v (want %v) on the training backend %v, bf16 %v (want %v)",
							step, s != m, c.copy, s.Backend == m.Backend, s.BF16(), c.copyBF16)
					}
				}}
			if err := tr.Train(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			if !c.copy {
				return
			}
			if c.steps == 3 && !strings.Contains(progress.String(), "sampling copy refreshes: 2 (") {
				t.Errorf("summary: %s", progress.String())
			}
			moved := false
			for _, rec := range readMetrics(t, filepath.Join(cfg.OutputDir, "metrics.jsonl")) {
				lo, hi := rec["sampling/importance_sampling_ratio/min"], rec["sampling/importance_sampling_ratio/max"]
				if lo == nil || hi == nil {
					t.Fatalf("no importance-sampling metrics: %v", rec)
				}
				moved = moved || lo.(float64) != 1 || hi.(float64) != 1
			}
			if !moved {
				t.Error("every importance-sampling ratio is 1: the copy's log-probs are the trainer's")
			}
		})
	}
}
