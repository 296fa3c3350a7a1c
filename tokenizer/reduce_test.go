package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/task"
)

// TestSmallMatchesHF: the embedded 2,048-id tokenizer encodes and decodes the
// 400 parity strings exactly as Hugging Face's tokenizers library does with
// the same tokenizer.json (so it is a real, loadable HF tokenizer).
func TestSmallMatchesHF(t *testing.T) {
	small, err := Small()
	if err != nil {
		t.Fatal(err)
	}
	if small.VocabSize() != SmallVocabSize {
		t.Fatalf("VocabSize = %d, want %d", small.VocabSize(), SmallVocabSize)
	}
	f, err := os.Open(filepath.Join("testdata", "parity", "small_hf_encode.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var c struct {
			Text    string `json:"text"`
			IDs     []int  `json:"ids"`
			Decoded string `json:"decoded"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		if got := small.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("case %d %q:\n got  %v\n want %v", n, c.Text, got, c.IDs)
		}
		if got := small.Decode(c.IDs); got != c.Decoded {
			t.Errorf("case %d: Decode = %q, HF decodes %q", n, got, c.Decoded)
		}
	}
	if n != 400 {
		t.Fatalf("%d cases, want 400", n)
	}
}

// TestSmallIsReduceOutput: the shipped small tokenizer is exactly what
// Reduce makes today (rebuild command in small.go).
func TestSmallIsReduceOutput(t *testing.T) {
	r, err := qwen(t).Reduce(SmallVocabSize - 256 - len(qwen(t).AddedTokens()))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"tokenizer.json": r.rawJSON, "tokenizer_config.json": r.rawCfg} {
		got, err := smallFS.ReadFile(SmallDir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s is stale: rebuild it with the command in small.go", SmallDir, name)
		}
	}
}

// TestReduce: reduced tokenizers keep the byte tokens, the first K merges
// and the added tokens renumbered in order; they are strictly smaller, still
// round-trip every parity string, never use fewer tokens than the full
// vocabulary, save and load back, and keep the chat template.
func TestReduce(t *testing.T) {
	full := qwen(t)
	cases := parityCases(t)
	for _, k := range []int{0, 20000} {
		r, err := full.Reduce(k)
		if err != nil {
			t.Fatalf("Reduce(%d): %v", k, err)
		}
		nAdded := len(full.AddedTokens())
		if got, want := r.VocabSize(), 256+k+nAdded; got != want || got >= full.VocabSize() {
			t.Errorf("Reduce(%d).VocabSize = %d, want %d (< %d)", k, got, want, full.VocabSize())
		}
		for i, a := range r.sortedAdded() {
			orig := full.sortedAdded()[i]
			if a.ID != 256+k+i || a.Content != orig.Content || a.Special != orig.Special {
				t.Errorf("Reduce(%d) added token %d = %+v, want %q at %d", k, i, a, orig.Content, 256+k+i)
			}
		}
		sp := r.Specials()
		if r.TokenString(sp.EOS) != "<|im_end|>" || r.TokenString(sp.Pad) != "<|endoftext|>" ||
			r.TokenString(sp.ToolCallStart) != "<tool_call>" {
			t.Errorf("Reduce(%d) specials %+v do not name <|im_end|>, <|endoftext|>, <tool_call>", k, sp)
		}
		// Kept ids are the full tokenizer's ids below 256+k, unchanged.
		for _, id := range []int{0, 255, 256 + k - 1} {
			if id < 0 {
				continue
			}
			if a, b := r.TokenString(id), full.TokenString(id); a != b {
				t.Errorf("Reduce(%d) id %d = %q, full has %q", k, id, a, b)
			}
		}
		more := 0
		for i, c := range cases {
			ids := r.Encode(c.Text)
			for _, id := range ids {
				if id < 0 || id >= r.VocabSize() {
					t.Fatalf("Reduce(%d) case %d: id %d out of range", k, i+1, id)
				}
			}
			if got, want := r.Decode(ids), full.Decode(full.Encode(c.Text)); got != want {
				t.Errorf("Reduce(%d) case %d: round trip %q, want %q", k, i+1, got, want)
			}
			if len(ids) < len(c.IDs) {
				t.Errorf("Reduce(%d) case %d: %d tokens, fewer than the full vocabulary's %d", k, i+1, len(ids), len(c.IDs))
			}
			if len(ids) > len(c.IDs) {
				more++
			}
		}
		if more == 0 {
			t.Errorf("Reduce(%d): no string took more tokens than with the full vocabulary", k)
		}
		dir := t.TempDir()
		if err := r.Save(dir); err != nil {
			t.Fatal(err)
		}
		back, err := Load(dir)
		if err != nil {
			t.Fatalf("Load(saved Reduce(%d)): %v", k, err)
		}
		if s := "Hello <|im_start|>wörld</tool_call>"; !slices.Equal(back.Encode(s), r.Encode(s)) {
			t.Errorf("saved and reloaded Reduce(%d) encodes differently", k)
		}
		src1, _ := full.ChatTemplateSource()
		src2, err := back.ChatTemplateSource()
		if err != nil || src1 != src2 {
			t.Errorf("Reduce(%d) chat template changed (err %v)", k, err)
		}
	}
	if _, err := full.Reduce(full.NumMerges()); err == nil {
		t.Error("Reduce(all merges) succeeded; it would not be smaller")
	}
	if _, err := full.Reduce(-1); err == nil {
		t.Error("Reduce(-1) succeeded")
	}
}

// TestTaskTokenCounts reports how many tokens the example tasks' rendered
// prompts (system prompt + task, with the tool schemas; and the full golden
// trajectory) take under the full and the small vocabulary.
func TestTaskTokenCounts(t *testing.T) {
	full := qwen(t)
	small, err := Small()
	if err != nil {
		t.Fatal(err)
	}
	tp, err := full.Template()
	if err != nil {
		t.Fatal(err)
	}
	tasks := readTasks(t, filepath.Join("testdata", "seed_tasks.jsonl"))
	if ex := filepath.Join("..", "examples", "customers", "tasks.jsonl"); fileExists(ex) {
		tasks = append(tasks, readTasks(t, ex)...)
	}
	tools := []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"name":"query_database","description":"Run a SQL query against the task's database and return the rows.","parameters":{"type":"object","properties":{"sql":{"type":"string","description":"one SQL statement"}},"required":["sql"]}}}`),
		json.RawMessage(`{"type":"function","function":{"name":"run_linter","description":"Run the configured linter on a workspace file; returns its exit code and output.","parameters":{"type":"object","properties":{"path":{"type":"string","description":"file path inside the workspace"}},"required":["path"]}}}`),
	}
	var totFull, totSmall int
	for _, tk := range tasks {
		prompt := []chat.Message{{Role: "system", Content: tk.SystemPrompt}, {Role: "user", Content: tk.Task}}
		if tk.SystemPrompt == "" {
			prompt = prompt[1:]
		}
		for _, conv := range []struct {
			what string
			msgs []chat.Message
			gen  bool
		}{{"prompt", prompt, true}, {"golden", append(slices.Clone(prompt), tk.Golden...), false}} {
			if conv.what == "golden" && len(tk.Golden) == 0 {
				continue
			}
			text, err := tp.Render(conv.msgs, tools, conv.gen)
			if err != nil {
				t.Fatalf("task %s: %v", tk.ID, err)
			}
			f, s := full.Encode(text), small.Encode(text)
			if full.Decode(f) != text || small.Decode(s) != text {
				t.Errorf("task %s %s: does not round-trip", tk.ID, conv.what)
			}
			if len(s) < len(f) {
				t.Errorf("task %s %s: small vocabulary used fewer tokens (%d) than the full one (%d)", tk.ID, conv.what, len(s), len(f))
			}
			t.Logf("task %-20s %-6s %5d bytes: %4d tokens full (151,665 ids), %4d small (2,048 ids), ratio %.2f",
				tk.ID, conv.what, len(text), len(f), len(s), float64(len(s))/float64(len(f)))
			totFull += len(f)
			totSmall += len(s)
		}
	}
	t.Logf("all %d tasks: %d tokens full, %d small (x%.2f)", len(tasks), totFull, totSmall, float64(totSmall)/float64(totFull))
}

func readTasks(t *testing.T, path string) []task.Task {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []task.Task
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var tk task.Task
		if err := json.Unmarshal([]byte(line), &tk); err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		if tk.ID == "" {
			tk.ID = fmt.Sprintf("%s:%d", filepath.Base(path), i+1)
		}
		out = append(out, tk)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
