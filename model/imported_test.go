package model

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/tokenizer"
)

// TestImportTinyGGUF imports a tiny Llama (q/k permuted as llama.cpp stores them) and a tiny Qwen2 (biases, untied
// output) written by gguf-py in Q8_0, Q4_0, Q4_1, F16, BF16 and F32, and a tiny Llama of hidden size 256 in the
// k-quants, Q5_0 and Q5_1 as ggml's own quantizers wrote them (testdata/gen_tiny_gguf.py), and compares the logits
// with transformers' model loaded from the same GGUF files, on a full, a left-padded and a right-padded row, and
// the greedy tokens.
func TestImportTinyGGUF(t *testing.T) {
	data, err := os.ReadFile("testdata/tiny_gguf_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]json.RawMessage
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	var toks, mask [][]int32
	json.Unmarshal(g["tokens"], &toks)
	json.Unmarshal(g["attention_mask"], &mask)
	backend := testBackend(t)
	for _, arch := range []string{"llama", "qwen2", "kquant"} {
		t.Run(arch, func(t *testing.T) {
			var want struct {
				Architecture string    `json:"architecture"`
				Logits       []float64 `json:"logits"`
				Logits64     []float64 `json:"logits64"`
				Greedy       []int     `json:"greedy"`
			}
			if err := json.Unmarshal(g[arch], &want); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cfg, err := ImportGGUF(filepath.Join("testdata", "tiny-"+arch+".gguf"), dir, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ArchitectureName() != want.Architecture || cfg.TieWordEmbeddings != (arch != "qwen2") {
				t.Fatalf("architecture %s tied %v, want %s", cfg.ArchitectureName(), cfg.TieWordEmbeddings, want.Architecture)
			}
			m, err := Load(backend, dir)
			if err != nil {
				t.Fatal(err)
			}
			logits := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			T, V := len(toks[0]), m.Config.VocabSize
			var d logitDiffs
			for b := range toks {
				for tt := range T {
					if mask[b][tt] == 0 {
						continue
					}
					for v := range V {
						i := (b*T+tt)*V + v
						d.add(float64(logits[i]), want.Logits[i], want.Logits64[i])
					}
				}
			}
			d.check(t, "logits")
			s, err := m.NewSession(1, 64, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			prompt := make([]int, T)
			for i, id := range toks[0] {
				prompt[i] = int(id)
			}
			if err := s.Append(context.Background(), [][]int{prompt}); err != nil {
				t.Fatal(err)
			}
			comps, err := s.Generate(context.Background(), SampleOptions{MaxNewTokens: len(want.Greedy)})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(comps[0].Tokens, want.Greedy) {
				t.Errorf("greedy %v, transformers %v", comps[0].Tokens, want.Greedy)
			}
			// The tokenizer and chat template came along.
			tok, err := tokenizer.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := tok.Template()
			if err != nil {
				t.Fatal(err)
			}
			if ids := tok.Encode("<|im_start|>the"); ids[0] != V-2 || tok.Decode(ids) != "<|im_start|>the" {
				t.Errorf("encode: %v", ids)
			}
			if tpl == nil {
				t.Error("no template")
			}
		})
	}
}

// TestImportAddTokens: tokens added at import get the next ids, mean embedding rows, and leave the logits of the
// original vocabulary as they were; a chat template given at import replaces the file's.
func TestImportAddTokens(t *testing.T) {
	toks, mask := tinyBatch(t)
	base := importTiny(t, "llama")
	want := run(t, base, base.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
	dir := t.TempDir()
	tpl := "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
	cfg, err := ImportGGUF("testdata/tiny-llama.gguf", dir, ImportOptions{ChatTemplate: tpl, AddTokens: []string{"<tool_call>", "</tool_call>"}})
	if err != nil {
		t.Fatal(err)
	}
	V := base.Config.VocabSize
	if cfg.VocabSize != V+2 {
		t.Fatalf("vocab %d, want %d", cfg.VocabSize, V+2)
	}
	m, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	emb, _, _ := m.Tensor("model.embed_tokens.weight")
	d := m.Config.HiddenSize
	if !slices.Equal(emb[V*d:(V+1)*d], emb[(V+1)*d:]) {
		t.Error("the two new rows differ")
	}
	got := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
	T := len(toks[0])
	for b := range toks {
		for tt := range T {
			if mask[b][tt] == 0 {
				continue
			}
			for v := range V {
				// Two more rows of lm_head: its product may be blocked, so rounded, differently.
				w := float64(want[(b*T+tt)*V+v])
				if diff := math.Abs(float64(got[(b*T+tt)*(V+2)+v]) - w); diff > dotTol(m.Config.HiddenSize, 1+math.Abs(w)) {
					t.Fatalf("logit [%d %d %d] moved by %g", b, tt, v, diff)
				}
			}
		}
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ids := tok.Encode("a<tool_call>b</tool_call>"); !slices.Equal(ids[1:2], []int{V}) || ids[len(ids)-1] != V+1 || tok.IsSpecial(V) {
		t.Errorf("encode: %v (special %v)", ids, tok.IsSpecial(V))
	}
	if src, err := tok.ChatTemplateSource(); err != nil || src != tpl {
		t.Errorf("template %q, %v", src, err)
	}
}
