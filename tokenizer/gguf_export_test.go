package tokenizer

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
)

// TestGGUFMetadataRoundTrip writes each tokenizer's GGUF metadata to a file, rebuilds tokenizer.json from it
// (GGUFFiles, the path llama.cpp's own files take into mcprl) and checks that the rebuilt tokenizer encodes the
// Qwen2.5 parity corpus and the HF edge cases to the same ids, with the same specials and chat template.
func TestGGUFMetadataRoundTrip(t *testing.T) {
	var texts []string
	for _, name := range []string{"qwen2.5_encode.jsonl", "hf_edge_encode.jsonl"} {
		f, err := os.Open(filepath.Join("testdata", "parity", name))
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
			tok, err := Load(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			vocab := tok.VocabSize() + 3 // the model's embeddings may have rows past the tokenizer's ids
			meta, err := tok.GGUFMetadata(vocab)
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
			tj, tc, err := GGUFFiles(r, GGUFOptions{})
			if err != nil {
				t.Fatal(err)
			}
			back, err := parse(tj, tc)
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

func TestGGUFMetadataRejects(t *testing.T) {
	tok, err := Load("small/qwen2.5-2048")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.GGUFMetadata(tok.VocabSize() - 1); err == nil || !strings.Contains(err.Error(), "embedding rows") {
		t.Errorf("too small a vocabulary: %v", err)
	}
	gpt2 := *tok
	gpt2.pattern = `\s+`
	if _, err := gpt2.GGUFMetadata(tok.VocabSize()); err == nil || !strings.Contains(err.Error(), `split "\\s+"`) {
		t.Errorf("unknown pre-tokenizer: %v", err)
	}
	noTemplate := *tok
	noTemplate.config.ChatTemplate = nil
	if _, err := noTemplate.GGUFMetadata(tok.VocabSize()); err == nil || !strings.Contains(err.Error(), "no chat_template") {
		t.Errorf("no chat template: %v", err)
	}
}
