package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoadRejects: tokenizers this package would encode wrongly are refused
// with an error naming the problem (mutations of the real small tokenizer).
func TestLoadRejects(t *testing.T) {
	tj, err := smallFS.ReadFile(SmallDir + "/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := smallFS.ReadFile(SmallDir + "/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, old, new, wantErr string
	}{
		{"not BPE", "tokenizer.json", `"type": "BPE"`, `"type": "WordPiece"`, "want BPE"},
		{"byte fallback", "tokenizer.json", `"byte_fallback": false`, `"byte_fallback": true`, "byte_fallback"},
		{"NFKC", "tokenizer.json", `"type": "NFC"`, `"type": "NFKC"`, "NFKC"},
		{"merges out of rank order", "tokenizer.json", "\"Ġ Ġ\",\n      \"ĠĠ ĠĠ\",", "\"ĠĠ ĠĠ\",\n      \"Ġ Ġ\",", "ranks are not merge order"},
		{"merges swapped", "tokenizer.json", "\"i n\",\n      \"Ġ t\",", "\"Ġ t\",\n      \"i n\",", "ranks are not merge order"},
		{"unknown eos", "tokenizer_config.json", `"eos_token": "<|im_end|>"`, `"eos_token": "<|nope|>"`, "not a token"},
		{"lstrip added token", "tokenizer.json", `"content": "<|im_end|>",
      "single_word": false,
      "lstrip": false`, `"content": "<|im_end|>",
      "single_word": false,
      "lstrip": true`, "not supported"},
	}
	for _, c := range cases {
		files := map[string]string{"tokenizer.json": string(tj), "tokenizer_config.json": string(cfg)}
		if !strings.Contains(files[c.file], c.old) {
			t.Fatalf("%s: %q not in %s", c.name, c.old, c.file)
		}
		files[c.file] = strings.Replace(files[c.file], c.old, c.new, 1)
		dir := t.TempDir()
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: Load error = %v, want one containing %q", c.name, err, c.wantErr)
		}
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("Load of an empty directory succeeded")
	}
}

// TestHFEdgeCases: Unicode whitespace, case folding ('ſ), combining marks
// beside added tokens, and long runs (the heap-merge path) encode as Hugging
// Face's tokenizers library encodes them (gen_hf_small.js), with the full and
// the small vocabulary.
func TestHFEdgeCases(t *testing.T) {
	full := qwen(t)
	small, err := Small()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "parity", "hf_edge_encode.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n, long := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c struct {
			Text     string `json:"text"`
			IDs      []int  `json:"ids"`
			SmallIDs []int  `json:"small_ids"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatal(err)
		}
		n++
		if hasLongRun(c.Text) {
			long++
		}
		if got := full.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("full %.30q: got %v, HF %v", c.Text, got, c.IDs)
		}
		if got := small.Encode(c.Text); !slices.Equal(got, c.SmallIDs) {
			t.Errorf("small %.30q: got %v, HF %v", c.Text, got, c.SmallIDs)
		}
	}
	if n != 26 || long < 10 {
		t.Errorf("%d cases (%d through the long-run path), want 26 (>= 10)", n, long)
	}
}
