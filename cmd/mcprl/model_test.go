package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/internal/enginetest"
	"github.com/mcprl/mcprl/model"
)

// TestModelInitCommand: `model init` writes a loadable HF directory whose weights depend only on the seed, and
// `model info` reads it back; a non-Qwen2 config is refused.
func TestModelInitCommand(t *testing.T) {
	cfg := "../../model/testdata/tied/config.json"
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	for i, seed := range []string{"3", "3", "4"} {
		if out, err := runMcprl(t, "", "model", "init", "--config", cfg, "--out", dirs[i], "--seed", seed); err != nil {
			t.Fatalf("init: %v\n%s", err, out)
		}
	}
	read := func(d string) []byte {
		b, err := os.ReadFile(filepath.Join(d, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(read(dirs[0]), read(dirs[1])) {
		t.Errorf("same seed gave different weights")
	}
	if bytes.Equal(read(dirs[0]), read(dirs[2])) {
		t.Errorf("different seeds gave the same weights")
	}
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(backend, dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	// HF init: std initializer_range (0.02) for the embedding.
	emb, _, _ := m.Tensor("model.embed_tokens.weight")
	var ss float64
	for _, v := range emb {
		ss += float64(v) * float64(v)
	}
	if std := (ss / float64(len(emb))); std < 0.015*0.015 || std > 0.025*0.025 {
		t.Errorf("embedding variance %g, want about 0.02^2", std)
	}
	out, err := runMcprl(t, "", "model", "info", dirs[0])
	if err != nil || !strings.Contains(out, "vocab 96") || !strings.Contains(out, "tied true") {
		t.Errorf("info: %v\n%s", err, out)
	}

	bad := filepath.Join(t.TempDir(), "config.json")
	data, _ := os.ReadFile(cfg)
	os.WriteFile(bad, []byte(strings.ReplaceAll(strings.ReplaceAll(string(data), "Qwen2ForCausalLM", "GemmaForCausalLM"), `"qwen2"`, `"gemma"`)), 0o644)
	if _, err := runMcprl(t, "", "model", "init", "--config", bad, "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("gemma config: err = %v", err)
	}
}

// TestModelForwardAndGenerateCommands: `model forward` writes the logits transformers computed for the same
// checkpoint and batch (model/testdata/golden.json) within 1e-5, and `model generate` with temperature 0 gives
// the greedy tokens of decoding without the cache.
func TestModelForwardAndGenerateCommands(t *testing.T) {
	const dir = "../../model/testdata/untied"
	var golden struct {
		Tokens        [][]int `json:"tokens"`
		AttentionMask [][]int `json:"attention_mask"`
		Models        map[string]struct {
			Logits   []float64 `json:"logits"`
			Logits64 []float64 `json:"logits64"`
		} `json:"models"`
	}
	data, err := os.ReadFile("../../model/testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"tokens": golden.Tokens, "attention_mask": golden.AttentionMask})
	out := filepath.Join(t.TempDir(), "fwd.safetensors")
	if msg, err := runMcprl(t, string(in), "model", "forward", "--model", dir, "--out", out); err != nil {
		t.Fatalf("forward: %v\n%s", err, msg)
	}
	got, err := model.LoadTensors(out)
	if err != nil {
		t.Fatal(err)
	}
	logits := tensors.MustCopyFlatData[float32](got["logits"])
	want := golden.Models["untied"].Logits
	if len(logits) != len(want) || got["token_logprobs"] == nil {
		t.Fatalf("forward wrote %d logits and token_logprobs %v; want %d logits", len(logits), got["token_logprobs"], len(want))
	}
	// Bounded as the model package's golden tests are: ours no further from transformers' float64 logits than
	// three times transformers' own float32 distance from them, plus one float32 rounding of the largest logit.
	want64 := golden.Models["untied"].Logits64
	if len(want64) != len(want) {
		t.Fatalf("golden.json has %d float64 logits for %d float32 ones", len(want64), len(want))
	}
	v := len(want) / (len(golden.Tokens) * len(golden.Tokens[0]))
	var from64, torchFrom64, maxAbs float64
	for i := range want {
		if b, p := i/v/len(golden.Tokens[0]), i/v%len(golden.Tokens[0]); golden.AttentionMask[b][p] == 1 {
			from64 = math.Max(from64, math.Abs(float64(logits[i])-want64[i]))
			torchFrom64 = math.Max(torchFrom64, math.Abs(want[i]-want64[i]))
			maxAbs = math.Max(maxAbs, math.Abs(want64[i]))
		}
	}
	if bound := 3 * (torchFrom64 + 0x1p-23*maxAbs); from64 > bound || math.IsNaN(from64) {
		t.Fatalf("logits are %g from transformers' float64, more than the bound %g (transformers' float32: %g)", from64, bound, torchFrom64)
	}
	if _, err := runMcprl(t, `{"tokens": [[1, 2]], "attention_mask": [[1]]}`, "model", "forward", "--model", dir, "--out", out); err == nil || !strings.Contains(err.Error(), "row 0") {
		t.Errorf("ragged input: error %v, want one naming row 0", err)
	}

	prompts := [][]int{{5, 6, 7}, {9, 10, 11, 12, 13, 14}}
	in, _ = json.Marshal(map[string]any{"prompts": prompts, "max_new_tokens": 12, "temperature": 0})
	msg, err := runMcprl(t, string(in), "model", "generate", "--model", dir, "--repeat", "2")
	if err != nil {
		t.Fatalf("generate: %v\n%s", err, msg)
	}
	var gen struct {
		Completions [][]int   `json:"completions"`
		Seconds     []float64 `json:"seconds"`
	}
	_, js, _ := strings.Cut(msg, "\n{") // after the engine line (stderr, merged here)
	if err := json.Unmarshal([]byte("{"+js), &gen); err != nil {
		t.Fatalf("%v: %s", err, msg)
	}
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(backend, dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := m.GreedyNoCache(context.Background(), prompts, 12, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(gen.Seconds) != 2 || len(gen.Completions) != 2 || !slices.Equal(gen.Completions[0], ref[0]) || !slices.Equal(gen.Completions[1], ref[1]) {
		t.Errorf("generate = %+v, greedy without cache %v", gen, ref)
	}
	// --bf16 samples with every weight in bfloat16: XLA only, refused on simplego with the reason.
	for _, engine := range enginetest.Engines() {
		msg, err := runMcprl(t, string(in), "model", "generate", "--model", dir, "--engine", engine, "--bf16")
		if engine == "simplego" {
			if err == nil || !strings.Contains(msg+err.Error(), "bf16 needs engine xla") {
				t.Errorf("generate --bf16 on simplego: %v, want the refusal:\n%s", err, msg)
			}
			continue
		}
		if err != nil {
			enginetest.Unavailable(t, engine, fmt.Errorf("%w\n%s", err, msg))
		}
		var bf struct {
			Completions [][]int `json:"completions"`
		}
		_, js, _ := strings.Cut(msg, "\n{")
		if err != nil || json.Unmarshal([]byte("{"+js), &bf) != nil || len(bf.Completions) != 2 || len(bf.Completions[0]) != 12 || len(bf.Completions[1]) != 12 {
			t.Errorf("generate --bf16 on %s: %v\n%s", engine, err, msg)
		}
	}
}
