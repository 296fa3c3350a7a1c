package sft_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/internal/enginetest"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/sft"
)

// TestSFTBF16: with bf16: true on XLA, three SFT steps of a tiny random Qwen2, trained whole and through a LoRA
// adapter: the loss falls and stays finite, the gradient is not zero; what trains stays float32 (the whole
// model's weights, or the adapter's A and B) and with the adapter the frozen base is stored in bfloat16;
// checkpoint-2 and final/ load back, final/'s adapter equal to the trained one.
func TestSFTBF16(t *testing.T) {
	ctx := context.Background()
	tok, examples := quickExamples(t)
	mc := model.TinyConfig(tok.VocabSize(), -1, tok.EOS())
	mc.HiddenSize, mc.IntermediateSize, mc.NumHiddenLayers, mc.NumAttentionHeads, mc.NumKeyValueHeads = 32, 64, 1, 2, 1
	eb, err := model.OpenEngine(model.EngineXLA)
	if err != nil {
		enginetest.Unavailable(t, "xla", err)
	}
	t.Cleanup(eb.Backend.Finalize)
	for _, lora := range []bool{false, true} {
		name := "full"
		if lora {
			name = "lora"
		}
		t.Run(name, func(t *testing.T) {
			m, err := model.New(eb.Backend, mc, 3)
			if err != nil {
				t.Fatal(err)
			}
			cfg := sft.Default()
			cfg.OutputDir = t.TempDir()
			cfg.MaxSteps, cfg.SaveSteps, cfg.LoggingSteps = 3, 2, 1
			cfg.PerDeviceTrainBatchSize = 4
			cfg.LearningRate, cfg.LRSchedulerType = 1e-2, "constant"
			cfg.BF16 = true
			if lora {
				cfg.UsePeft, cfg.LoraR, cfg.LoraAlpha, cfg.LoraDropout = true, 8, 16, 0
				cfg.LearningRate = 5e-2
				if err := cfg.PeftArguments.Attach(m, "", cfg.Seed, nil); err != nil {
					t.Fatal(err)
				}
			}
			tr := &sft.Trainer{Config: &cfg, Model: m, TokenizerDir: "../tokenizer/small/qwen2.5-2048", Examples: examples}
			if err := tr.Train(ctx); err != nil {
				t.Fatal(err)
			}
			if !m.BF16() {
				t.Fatal("the trained model is not in bf16")
			}
			losses := readLosses(t, filepath.Join(cfg.OutputDir, "metrics.jsonl"))
			if len(losses) != 3 || !(losses[2][0] < losses[0][0]) || !(losses[0][1] > 0) {
				t.Fatalf("metrics (loss, grad_norm) %v: want 3 steps, the loss falling, a gradient", losses)
			}
			for _, l := range losses {
				if math.IsNaN(l[0]) || math.IsInf(l[0], 0) || math.IsNaN(l[1]) || math.IsInf(l[1], 0) {
					t.Fatalf("metrics (loss, grad_norm) %v: not finite", losses)
				}
			}
			dtypes := storedDTypes(m)
			trained := "model.layers.0.self_attn.q_proj.weight"
			frozen := "bfloat16"
			if lora {
				trained = "model.layers.0.self_attn.q_proj.lora_A.weight"
			} else {
				frozen = "float32" // nothing frozen: every weight trains from its float32 master copy
			}
			if dtypes[trained] != "float32" {
				t.Errorf("%s (trained) stored as %s, want float32", trained, dtypes[trained])
			}
			if d := dtypes["model.layers.0.mlp.up_proj.weight"]; d != frozen {
				t.Errorf("up_proj weight stored as %s, want %s", d, frozen)
			}
			for _, dir := range []string{"checkpoint-2", "final"} {
				back, err := model.Load(eb.Backend, filepath.Join(cfg.OutputDir, dir))
				if err != nil {
					t.Fatalf("%s: %v", dir, err)
				}
				if dir != "final" || !lora {
					continue
				}
				want, _, err := m.Tensor(trained)
				if err != nil {
					t.Fatal(err)
				}
				got, _, err := back.Tensor(trained)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("final/'s %s[%d] = %v, trained %v", trained, i, got[i], want[i])
					}
				}
			}
			t.Logf("bf16 %s: (loss, grad_norm) %v", name, losses)
		})
	}
}

// storedDTypes maps the model's variables (by HF name) to the dtype they are stored in.
func storedDTypes(m *model.Model) map[string]string {
	out := map[string]string{}
	for v := range m.Ctx.IterVariables() {
		name := strings.ReplaceAll(strings.TrimPrefix(v.Scope(), "/"), "/", ".") + "." + v.Name()
		out[name] = strings.ToLower(v.Shape().DType.String())
	}
	return out
}

// readLosses reads each metrics line's loss and grad_norm.
func readLosses(t *testing.T, path string) [][2]float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]float64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			Loss     float64 `json:"loss"`
			GradNorm float64 `json:"grad_norm"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]float64{rec.Loss, rec.GradNorm})
	}
	return out
}

// TestBF16Refused: bf16: true is read (and round-trips as the key bf16), refused in a config with engine or
// sampling_engine simplego, naming the key and its line, and refused by the trainer on a simplego model, naming
// the engine.
func TestBF16Refused(t *testing.T) {
	parse := func(yaml string) (*sft.Config, error) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return sft.Load(path)
	}
	cfg, err := parse("bf16: true\nengine: xla\n")
	if err != nil || !cfg.BF16 || len(cfg.Ignored) > 0 {
		t.Fatalf("bf16: true: %+v, %v", cfg, err)
	}
	if cfg, err := parse("seed: 1\n"); err != nil || cfg.BF16 {
		t.Errorf("bf16 on by default (%v)", err)
	}
	for _, yaml := range []string{"seed: 1\nbf16: true\nengine: simplego\n", "seed: 1\nbf16: true\nsampling_engine: simplego\n"} {
		_, err = parse(yaml)
		if err == nil || !strings.Contains(err.Error(), "c.yaml:2: bf16: true with ") || !strings.Contains(err.Error(), "simplego: bf16 needs engine xla") {
			t.Errorf("%q: %v", yaml, err)
		}
	}
	tok, examples := quickExamples(t)
	mc := model.TinyConfig(tok.VocabSize(), -1, tok.EOS())
	mc.HiddenSize, mc.IntermediateSize, mc.NumHiddenLayers, mc.NumAttentionHeads, mc.NumKeyValueHeads = 16, 32, 1, 2, 1
	eb, err := model.OpenEngine(model.EngineSimpleGo)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(eb.Backend, mc, 3)
	if err != nil {
		t.Fatal(err)
	}
	c := sft.Default()
	c.OutputDir, c.MaxSteps, c.BF16 = t.TempDir(), 1, true
	tr := &sft.Trainer{Config: &c, Model: m, TokenizerDir: "../tokenizer/small/qwen2.5-2048", Examples: examples}
	if err := tr.Train(context.Background()); !errors.Is(err, model.ErrBF16SimpleGo) {
		t.Errorf("training in bf16 on simplego: %v, want model.ErrBF16SimpleGo", err)
	}
}
