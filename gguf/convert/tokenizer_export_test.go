package convert

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/gguf"
	"github.com/mcprl/mcprl/tokenizer"
)

// tokenizerDir is the path of one of package tokenizer's test tokenizers (testdata/qwen2.5, testdata/smollm2,
// small/qwen2.5-2048).
func tokenizerDir(dir string) string {
	return filepath.Join("..", "..", "tokenizer", filepath.FromSlash(dir))
}

// TestTokenizerMetadataRoundTrip writes each tokenizer's GGUF metadata to a file, rebuilds tokenizer.json from it
// (TokenizerFiles, the path llama.cpp's own files take into mcprl) and checks that the rebuilt tokenizer encodes the
// Qwen2.5 parity corpus and the HF edge cases to the same ids, with the same specials and chat template.
func TestTokenizerMetadataRoundTrip(t *testing.T) {
	var texts []string
	for _, name := range []string{"qwen2.5_encode.jsonl", "hf_edge_encode.jsonl"} {
		f, err := os.Open(filepath.Join(tokenizerDir("testdata/parity"), name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var c struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatal(err)
			}
			texts = append(texts, c.Text)
		}
		f.Close()
	}
	texts = append(texts, "<tool_call>\n{\"name\": \"q\"}\n</tool_call><|im_end|>", "x<|endoftext|>y 12345")
	for _, c := range []struct{ dir, pre string }{
		{"testdata/qwen2.5", "qwen2"}, {"testdata/smollm2", "smollm"}, {"small/qwen2.5-2048", "qwen2"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			tok, err := tokenizer.Load(tokenizerDir(c.dir))
			if err != nil {
				t.Fatal(err)
			}
			vocab := tok.VocabSize() + 3 // the model's embeddings may have rows past the tokenizer's ids
			meta, err := TokenizerMetadata(tok, vocab)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "tok.gguf")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := gguf.Write(f, append([]gguf.KV{{Key: "general.architecture", Value: "qwen2"}}, meta...), nil); err != nil {
				t.Fatal(err)
			}
			f.Close()
			r, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if pre, _ := r.String("tokenizer.ggml.pre"); pre != c.pre {
				t.Errorf("pre = %q, want %q", pre, c.pre)
			}
			tokens, _ := r.Strings("tokenizer.ggml.tokens")
			types, _ := r.Ints("tokenizer.ggml.token_type")
			if len(tokens) != vocab || tokens[vocab-1] != "[PAD"+strconv.Itoa(vocab-1)+"]" || types[vocab-1] != ggufTokenUnused {
				t.Errorf("%d tokens, last %q type %d", len(tokens), tokens[len(tokens)-1], types[len(types)-1])
			}
			tj, tc, err := TokenizerFiles(r, TokenizerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			back, err := tokenizer.Parse(tj, tc)
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range texts {
				if got, want := back.Encode(text), tok.Encode(text); !slices.Equal(got, want) {
					t.Fatalf("Encode(%q) after the round trip\n got %v\nwant %v", text, got, want)
				}
			}
			if back.EOS() != tok.EOS() || back.PadID() != tok.PadID() || back.NumMerges() != tok.NumMerges() {
				t.Errorf("eos %d pad %d merges %d, want %d %d %d", back.EOS(), back.PadID(), back.NumMerges(), tok.EOS(), tok.PadID(), tok.NumMerges())
			}
			for _, a := range tok.AddedTokens() {
				// An added token llama.cpp's converter deems special by its looks (<|fim_prefix|>) comes back special.
				if want := a.Special || looksSpecial(a.Content); back.IsSpecial(a.ID) != want || back.TokenString(a.ID) != a.Content {
					t.Errorf("added token %d %q: special %v, want %v", a.ID, back.TokenString(a.ID), back.IsSpecial(a.ID), want)
				}
			}
			want, _ := tok.ChatTemplateSource()
			if got, err := back.ChatTemplateSource(); err != nil || got != want {
				t.Errorf("chat template differs after the round trip: %v", err)
			}
		})
	}
}

// TestTokenizerMetadataRejects: too small a vocabulary, a pre-tokenizer llama.cpp has no name for and a tokenizer
// without a chat template are refused, naming what.
func TestTokenizerMetadataRejects(t *testing.T) {
	src := tokenizerDir("small/qwen2.5-2048")
	tok, err := tokenizer.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TokenizerMetadata(tok, tok.VocabSize()-1); err == nil || !strings.Contains(err.Error(), "embedding rows") {
		t.Errorf("too small a vocabulary: %v", err)
	}
	// edited loads the tokenizer with one string of a file replaced.
	edited := func(file, from, to string) *tokenizer.Tokenizer {
		t.Helper()
		dir := t.TempDir()
		for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if f == file {
				if !strings.Contains(string(b), from) {
					t.Fatalf("%s holds no %s", f, from)
				}
				b = []byte(strings.Replace(string(b), from, to, 1))
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tok, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	qwen2Regex, _ := json.Marshal(qwen2Pattern)
	gpt2 := edited("tokenizer.json", string(qwen2Regex), `"\\s+"`)
	if _, err := TokenizerMetadata(gpt2, tok.VocabSize()); err == nil || !strings.Contains(err.Error(), `split "\\s+"`) {
		t.Errorf("unknown pre-tokenizer: %v", err)
	}
	noTemplate := edited("tokenizer_config.json", `"chat_template"`, `"no_chat_template"`)
	if _, err := TokenizerMetadata(noTemplate, tok.VocabSize()); err == nil || !strings.Contains(err.Error(), "no chat_template") {
		t.Errorf("no chat template: %v", err)
	}
}
