package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/internal/enginetest"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/tokenizer"
)

// TestCommandsOnEngines runs the commands that run a model on each engine besides simplego (enginetest.Others;
// the rest of this package's tests run on simplego): the engine named by a config's engine key and by --engine
// (which overrides it) on each command's first line; train with a LoRA adapter trained with dropout and the rows
// of the tool-call tokens, checkpoints, and --resume to a further step; sft; eval and chat of the trained model;
// and greedy generate, whose tokens and log-probs must be the simplego engine's (log-probs within float32
// rounding of a forward pass: 4·eps32·(√hidden + √vocab + √positions)·(1 + |log-prob|)).
func TestCommandsOnEngines(t *testing.T) {
	for _, engine := range enginetest.Others() {
		t.Run(engine, func(t *testing.T) {
			if eb, err := model.OpenEngine(model.Engine(engine)); err != nil {
				enginetest.Unavailable(t, engine, err)
			} else {
				eb.Backend.Finalize()
			}
			firstLine := func(what, out, want string) {
				t.Helper()
				if line, _, _ := strings.Cut(out, "\n"); !strings.HasPrefix(line, "engine: "+want+" ") {
					t.Errorf("%s: first line %q, want the engine %s named", what, line, want)
				}
			}
			out, err := runMcprl(t, "", "model", "info", "--engine", engine, customersBase)
			if err != nil {
				t.Fatalf("model info: %v\n%s", err, out)
			}
			firstLine("model info", out, engine)

			tok, err := tokenizer.Load(customersBase)
			if err != nil {
				t.Fatal(err)
			}
			open, _ := tok.TokenID("<tool_call>")
			closing, _ := tok.TokenID("</tool_call>")
			config := func(steps int) string {
				path := trainConfig(t, steps)
				extra := fmt.Sprintf("engine: %s\nuse_peft: true\nlora_r: 4\nlora_alpha: 8\nlora_dropout: 0.1\n"+
					"lora_target_modules: [q_proj, v_proj, down_proj]\ntrainable_token_indices: [%d, %d]\n", engine, open, closing)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(data, extra...), 0o644); err != nil {
					t.Fatal(err)
				}
				return path
			}
			run := filepath.Join(t.TempDir(), "run")
			_, stderr, err := runCmd("train", "--config", config(2), "--output-dir", run)
			if err != nil {
				t.Fatalf("train: %v\n%s", err, stderr)
			}
			firstLine("train", stderr, engine)
			_, stderr, err = runCmd("train", "--config", config(3), "--output-dir", run, "--resume")
			if err != nil || !strings.Contains(stderr, "resuming from "+filepath.Join(run, "checkpoint-1")) {
				t.Fatalf("train --resume: %v\n%s", err, stderr)
			}
			if steps := metricsByStep(t, filepath.Join(run, "metrics.jsonl")); len(steps) != 3 || steps[3] == nil {
				t.Errorf("after --resume to step 3: metrics of steps %v", steps)
			}
			final := filepath.Join(run, "final")

			// Trained on the engine, sampled on simplego: the first line names both, and the copy was refreshed.
			_, stderr, err = runCmd("train", "--config", config(2), "--output-dir", filepath.Join(t.TempDir(), "split"), "--sampling-engine", "simplego")
			if err != nil {
				t.Fatalf("train --sampling-engine simplego: %v\n%s", err, stderr)
			}
			firstLine("train --sampling-engine simplego", stderr, engine)
			if line, _, _ := strings.Cut(stderr, "\n"); !strings.Contains(line, " | sampling engine: simplego (") || !strings.Contains(stderr, "sampling copy refreshes: 1 (") {
				t.Errorf("train --sampling-engine simplego: %s", stderr)
			}

			// The config says the engine; --engine overrides it.
			_, stderr, err = runCmd("eval", "--config", config(1), "--model", final, "--k", "1", "--engine", "simplego", "--max-completion-length", "32")
			if err != nil {
				t.Fatalf("eval --engine simplego: %v\n%s", err, stderr)
			}
			firstLine("eval --config (engine "+engine+") --engine simplego", stderr, "simplego")
			_, stderr, err = runCmd("eval", "--config", config(1), "--model", final, "--k", "1", "--max-completion-length", "32")
			if err != nil {
				t.Fatalf("eval: %v\n%s", err, stderr)
			}
			firstLine("eval --config", stderr, engine)

			sftCfg := filepath.Join(t.TempDir(), "sft.yaml")
			if err := os.WriteFile(sftCfg, []byte(fmt.Sprintf("model: %s\ntasks: ../../examples/customers/quick_tasks.jsonl\nfixtures: %s\n"+
				"use_peft: true\nlora_r: 4\nlora_alpha: 8\nmax_steps: 1\nper_device_train_batch_size: 4\nlogging_steps: 1\nmax_prompt_length: 1024\nmax_completion_length: 1024\n",
				customersBase, fixturesRoot)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, err = runCmd("sft", "--config", sftCfg, "--output-dir", filepath.Join(t.TempDir(), "sft"), "--engine", engine)
			if err != nil {
				t.Fatalf("sft: %v\n%s", err, stderr)
			}
			firstLine("sft", stderr, engine)

			out, err = runMcprl(t, "How many customers are inactive?\nexit\n", "chat", "--engine", engine, "--model", final,
				"--fixture", fixturesRoot+"/customers", "--max-completion-length", "32")
			if err != nil || !strings.Contains(out, "question: How many customers are inactive?") {
				t.Fatalf("chat: %v\n%s", err, out)
			}
			firstLine("chat", out, engine)

			// Greedy decoding through the KV cache gives the simplego engine's tokens and log-probs.
			gen := map[string][]float32{}
			var ids map[string][]int
			for _, e := range []string{"simplego", engine} {
				stdout, stderr, err := runCmd("generate", "--engine", e, "--model", final, "--prompt", "How many customers are inactive?", "--chat",
					"--greedy", "--logprobs", "--max-new-tokens", "24")
				if err != nil {
					t.Fatalf("generate --engine %s: %v\n%s", e, err, stderr)
				}
				firstLine("generate", stderr, e)
				recs := readRecords(t, stdout)
				if len(recs) != 1 {
					t.Fatalf("generate --engine %s: %d records", e, len(recs))
				}
				if ids == nil {
					ids = map[string][]int{}
				}
				ids[e], gen[e] = recs[0].IDs, recs[0].LogProbs
			}
			if fmt.Sprint(ids[engine]) != fmt.Sprint(ids["simplego"]) {
				t.Fatalf("greedy tokens: %s %v, simplego %v", engine, ids[engine], ids["simplego"])
			}
			m, err := model.LoadConfig(filepath.Join(final, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			rel := 4 * 0x1p-23 * (math.Sqrt(float64(m.HiddenSize)) + math.Sqrt(float64(m.VocabSize)) + math.Sqrt(64))
			worst := 0.0
			for i, w := range gen["simplego"] {
				d := math.Abs(float64(gen[engine][i] - w))
				worst = max(worst, d)
				if d > rel*(1+math.Abs(float64(w))) {
					t.Errorf("token %d: log-prob %v on %s, %v on simplego", i, gen[engine][i], engine, w)
				}
			}
			t.Logf("greedy: %d tokens equal, log-probs within %.2g of simplego's", len(ids[engine]), worst)
		})
	}
}
