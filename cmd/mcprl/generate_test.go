package main

import (
	"bufio"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/completion"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

// tinyModel writes a tiny random Qwen2 with the reduced tokenizer and returns its directory.
func tinyModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if out, err := runMcprl(t, "", "model", "init", "--tokenizer", "../../tokenizer/small/qwen2.5-2048", "--out", dir, "--seed", "4"); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	return dir
}

func readRecords(t *testing.T, out string) []completion.Record {
	t.Helper()
	var recs []completion.Record
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "{") {
			continue // the engine note on stderr
		}
		var r completion.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		recs = append(recs, r)
	}
	return recs
}

// TestGenerateGreedyLogprobs: `generate --greedy --logprobs` writes the prompt's ids (the chat template rendered
// with --chat), tokens that are each the argmax of `model forward`'s logits over the sequence so far, log-probs
// equal to forward's token_logprobs for them within 1e-5, and the decoded text.
func TestGenerateGreedyLogprobs(t *testing.T) {
	dir := tinyModel(t)
	out, err := runMcprl(t, "", "generate", "--model", dir, "--prompt", "How many customers?", "--chat", "--greedy",
		"--logprobs", "--max-new-tokens", "24")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	recs := readRecords(t, out)
	if len(recs) != 1 {
		t.Fatalf("%d records: %s", len(recs), out)
	}
	r := recs[0]
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nHow many customers?<|im_end|>\n<|im_start|>assistant\n"; !strings.HasSuffix(r.Prompt, want) ||
		!slices.Equal(r.PromptIDs, tok.Encode(r.Prompt)) {
		t.Errorf("prompt %q ids %v", r.Prompt, r.PromptIDs)
	}
	if len(r.IDs) == 0 || len(r.LogProbs) != len(r.IDs) || r.Text != tok.Decode(r.IDs) {
		t.Fatalf("record %+v", r)
	}
	if (r.FinishReason == "length") != (len(r.IDs) == 24) {
		t.Errorf("finish_reason %q after %d tokens", r.FinishReason, len(r.IDs))
	}

	seq := append(slices.Clone(r.PromptIDs), r.IDs...)
	mask := make([]int, len(seq))
	for i := range mask {
		mask[i] = 1
	}
	in, _ := json.Marshal(map[string]any{"tokens": [][]int{seq}, "attention_mask": [][]int{mask}})
	fwd := filepath.Join(t.TempDir(), "fwd.safetensors")
	if msg, err := runMcprl(t, string(in), "model", "forward", "--model", dir, "--out", fwd); err != nil {
		t.Fatalf("forward: %v\n%s", err, msg)
	}
	got, err := model.LoadTensors(fwd)
	if err != nil {
		t.Fatal(err)
	}
	logits := tensors.MustCopyFlatData[float32](got["logits"])
	lps := tensors.MustCopyFlatData[float32](got["token_logprobs"])
	v := len(logits) / len(seq)
	for i, id := range r.IDs {
		pos := len(r.PromptIDs) + i
		row := logits[(pos-1)*v : pos*v]
		if best := argmax(row); best != id {
			t.Errorf("token %d is %d, forward's argmax %d", i, id, best)
		}
		// Two float32 computations of one log-prob (the cached decode and the whole-sequence forward) add
		// their row's terms in other orders: a few roundings of each, growing as a random walk over the
		// vocabulary, relative to the row's largest |logit| (the log-sum-exp's scale).
		scale := 1.0
		for _, x := range row {
			scale = math.Max(scale, math.Abs(float64(x)))
		}
		if d, tol := math.Abs(float64(r.LogProbs[i]-lps[pos])), 4*0x1p-23*math.Sqrt(float64(v))*scale; d > tol {
			t.Errorf("log-prob of token %d: %g, forward %g (|diff| %g > %g)", i, r.LogProbs[i], lps[pos], d, tol)
		}
	}
}

func argmax(row []float32) int {
	best := 0
	for i, x := range row {
		if x > row[best] {
			best = i
		}
	}
	return best
}

// TestGenerateTasks: one record per task, in order, with the task's id and its prompt rendered as `tokenize`
// renders the same messages; a completion that stops ends at an end-of-turn or </tool_call> token.
func TestGenerateTasks(t *testing.T) {
	dir := tinyModel(t)
	const tasksFile = "../../examples/customers/quick_tasks.jsonl"
	out, err := runMcprl(t, "", "generate", "--model", dir, "--tasks", tasksFile, "--fixtures", "../../examples/fixtures",
		"--max-new-tokens", "6", "--seed", "2", "--batch-size", "3", "--out", filepath.Join(t.TempDir(), "gen.jsonl"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	tasks, err := task.Load(tasksFile, task.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The same run to stdout.
	out, err = runMcprl(t, "", "generate", "--model", dir, "--tasks", tasksFile, "--fixtures", "../../examples/fixtures",
		"--max-new-tokens", "6", "--seed", "2", "--batch-size", "3")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	recs := readRecords(t, out)
	if len(recs) != len(tasks) {
		t.Fatalf("%d records for %d tasks", len(recs), len(tasks))
	}
	tok, _ := tokenizer.Load(dir)
	stops := map[int]bool{}
	for _, s := range []string{"<|im_end|>", "<|endoftext|>", "</tool_call>"} {
		if id, ok := tok.TokenID(s); ok {
			stops[id] = true
		}
	}
	for i, r := range recs {
		tk := tasks[i]
		if r.ID != tk.ID {
			t.Fatalf("record %d is task %q, want %q", i, r.ID, tk.ID)
		}
		chat, _ := json.Marshal(map[string]any{"messages": []map[string]string{
			{"role": "system", "content": tk.SystemPrompt}, {"role": "user", "content": tk.Task}}, "add_generation_prompt": true})
		msg, err := runMcprl(t, string(chat), "tokenize", "--tokenizer", dir)
		if err != nil {
			t.Fatal(err)
		}
		var want struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		}
		json.Unmarshal([]byte(msg), &want)
		if tk.SystemPrompt != "" && (r.Prompt != want.Text || !slices.Equal(r.PromptIDs, want.IDs)) {
			t.Errorf("task %s: prompt %q, tokenize renders %q", tk.ID, r.Prompt, want.Text)
		}
		last := r.IDs[len(r.IDs)-1]
		if (r.FinishReason == "stop") != stops[last] || r.LogProbs != nil {
			t.Errorf("task %s: finish_reason %q, last token %d, logprobs %v", tk.ID, r.FinishReason, last, r.LogProbs)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--model", "x"}, "give one of --prompt TEXT and --tasks FILE"},
		{[]string{"generate", "--model", "x", "--prompt", "a", "--tasks", "t.jsonl"}, "give one of"},
		{[]string{"generate", "--model", "x", "--prompt", "a", "--max-new-tokens", "0"}, "--max-new-tokens 0"},
		{[]string{"generate", "--model", "/nonexistent", "--prompt", "a"}, "/nonexistent"},
	} {
		if _, err := runMcprl(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
}
