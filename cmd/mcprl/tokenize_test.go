package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/tokenizer"
)

const qwenTestDir = "../../tokenizer/testdata/qwen2.5"

func runMcprl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestTokenizeCommand: the command converts stdin to stdout with the
// --tokenizer's tokenizer (tokenizer.ConvertJSONL, tested there), encoding or
// with --decode decoding, and names a bad stdin line.
func TestTokenizeCommand(t *testing.T) {
	tok, err := tokenizer.Load(qwenTestDir)
	if err != nil {
		t.Fatal(err)
	}
	text := "<|im_start|>user\nnaïve café<|im_end|>"
	b, _ := json.Marshal(map[string]string{"text": text})
	out, err := runMcprl(t, string(b)+"\n", "tokenize", "--tokenizer", qwenTestDir)
	if err != nil {
		t.Fatalf("tokenize: %v\n%s", err, out)
	}
	var rec struct{ IDs []int }
	if err := json.Unmarshal([]byte(out), &rec); err != nil || !slices.Equal(rec.IDs, tok.Encode(text)) {
		t.Fatalf("tokenize: %q (%v), want the ids %v", out, err, tok.Encode(text))
	}
	out, err = runMcprl(t, out, "tokenize", "--tokenizer", qwenTestDir, "--decode")
	var dec struct{ Text string }
	if err != nil || json.Unmarshal([]byte(out), &dec) != nil || dec.Text != text {
		t.Errorf("tokenize --decode: %q, %v; want the text %q back", out, err, text)
	}
	if _, err := runMcprl(t, "{\"text\": \"ok\"}\n{\"txt\": 1}\n", "tokenize", "--tokenizer", qwenTestDir); err == nil || !strings.Contains(err.Error(), "stdin line 2") {
		t.Errorf("bad line: err = %v, want one naming stdin line 2", err)
	}
}

// TestTokenizerReduceCommand writes a reduced tokenizer that loads back with the asked size.
func TestTokenizerReduceCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small")
	out, err := runMcprl(t, "", "tokenizer", "reduce", "--tokenizer", qwenTestDir, "--size", "600", "--out", dir)
	if err != nil {
		t.Fatalf("reduce: %v\n%s", err, out)
	}
	r, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.VocabSize() != 600 || r.NumMerges() != 600-256-22 {
		t.Errorf("reduced: %d ids, %d merges; want 600, 322", r.VocabSize(), r.NumMerges())
	}
	if s := "<|im_start|>assistant\n<tool_call>"; r.Decode(r.Encode(s)) != s {
		t.Errorf("reduced tokenizer does not round-trip %q", s)
	}
	if _, err := runMcprl(t, "", "tokenizer", "reduce", "--tokenizer", qwenTestDir, "--out", dir); err == nil {
		t.Error("reduce without --vocab or --size succeeded")
	}
}
