package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
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

// TestTokenizeCommand: JSONL text in, ids out in order, equal to the
// tokenizer package's Encode; --decode gives the text back.
func TestTokenizeCommand(t *testing.T) {
	tok, err := tokenizer.Load(qwenTestDir)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"<|im_start|>user\nHow many singers are older than 30?<|im_end|>", "", "naïve café 日本語 😀", "SELECT *\n  FROM t;\n\n"}
	var in strings.Builder
	for _, s := range texts {
		b, _ := json.Marshal(map[string]string{"text": s})
		in.Write(b)
		in.WriteString("\n\n") // blank lines are skipped
	}
	out, err := runMcprl(t, in.String(), "tokenize", "--tokenizer", qwenTestDir)
	if err != nil {
		t.Fatalf("tokenize: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%d output lines for %d inputs:\n%s", len(lines), len(texts), out)
	}
	var decIn strings.Builder
	for i, l := range lines {
		var rec struct{ IDs []int }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %d %q: %v", i+1, l, err)
		}
		if want := tok.Encode(texts[i]); !slices.Equal(rec.IDs, want) && !(len(want) == 0 && len(rec.IDs) == 0) {
			t.Errorf("line %d: ids %v, want %v", i+1, rec.IDs, want)
		}
		decIn.WriteString(l + "\n")
	}
	out, err = runMcprl(t, decIn.String(), "tokenize", "--tokenizer", qwenTestDir, "--decode")
	if err != nil {
		t.Fatalf("tokenize --decode: %v\n%s", err, out)
	}
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var rec struct{ Text string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("decode line %d %q: %v", i+1, l, err)
		}
		if rec.Text != texts[i] {
			t.Errorf("decode line %d: %q, want %q", i+1, rec.Text, texts[i])
		}
	}
	if _, err := runMcprl(t, "{\"text\": \"ok\"}\n{\"txt\": 1}\n", "tokenize", "--tokenizer", qwenTestDir); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: err = %v, want one naming line 2", err)
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

// TestTokenizeChat: a {"messages", "tools"} line gives the chat template's rendering and its ids, equal to the
// tokenizer package's Render and Encode; a bad message is an error naming the input line.
func TestTokenizeChat(t *testing.T) {
	tok, err := tokenizer.Load(qwenTestDir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	line := `{"messages": [{"role": "user", "content": "count"}, {"role": "assistant", "content": "", "tool_calls": [{"name": "query_database", "arguments": {"sql": "SELECT 1"}}]}, {"role": "tool", "name": "query_database", "content": "1"}], "tools": [{"type": "function", "function": {"name": "query_database"}}], "add_generation_prompt": true}`
	out, err := runMcprl(t, line+"\n", "tokenize", "--tokenizer", qwenTestDir)
	if err != nil {
		t.Fatalf("tokenize: %v\n%s", err, out)
	}
	var got struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var in struct {
		Messages []chat.Message    `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal([]byte(line), &in); err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(in.Messages, in.Tools, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != want || !strings.HasSuffix(got.Text, "<|im_start|>assistant\n") {
		t.Errorf("text %q, want %q", got.Text, want)
	}
	if !slices.Equal(got.IDs, tok.Encode(want)) {
		t.Errorf("ids %v, want %v", got.IDs, tok.Encode(want))
	}
	if _, err := runMcprl(t, "{\"text\": \"a\"}\n{\"messages\": [{\"role\": 3}]}\n", "tokenize", "--tokenizer", qwenTestDir); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad message: error %v, want one naming line 2", err)
	}
}
