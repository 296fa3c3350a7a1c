package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
