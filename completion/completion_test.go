package completion_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/completion"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

// tiny is a random two-layer Qwen2 over the embedded small tokenizer.
func tiny(t *testing.T) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	eos, _ := tok.TokenID("<|im_end|>")
	cfg := model.TinyConfig(tok.VocabSize(), -1, eos)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 64, 128, 2
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(backend, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

// Generate samples batch by batch, each batch from the seed of its first
// record, as one call of the model's Generate would, and emits the batches
// in order.
func TestGenerateBatches(t *testing.T) {
	m, tok := tiny(t)
	ctx := context.Background()
	prompts := []string{"SELECT", "<|im_start|>user\nhi<|im_end|>\n", "count the rows", "a", "b"}
	records := make([]completion.Record, len(prompts))
	for i, p := range prompts {
		records[i].Prompt = p
	}
	o := completion.Options{BatchSize: 2, Seed: 7, LogProbs: true, Sample: model.SampleOptions{Temperature: 1, MaxNewTokens: 5}}
	var sizes []int
	err := completion.Generate(ctx, m, tok, records, o, func(b []completion.Record) error {
		sizes = append(sizes, len(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Errorf("batches of %v, want [2 2 1]", sizes)
	}
	for start := 0; start < len(prompts); start += 2 {
		var ids [][]int
		for _, p := range prompts[start:min(start+2, len(prompts))] {
			ids = append(ids, tok.Encode(p))
		}
		want, err := m.Generate(ctx, ids, o.Sample, 7+uint64(start))
		if err != nil {
			t.Fatal(err)
		}
		for j, c := range want {
			r := records[start+j]
			if !slices.Equal(r.PromptIDs, ids[j]) || !slices.Equal(r.IDs, c.Tokens) || !slices.Equal(r.LogProbs, c.LogProbs) ||
				r.Text != tok.Decode(c.Tokens) || r.FinishReason != "length" {
				t.Errorf("record %d: %+v, want the completion %+v of seed %d", start+j, r, c, 7+start)
			}
		}
	}
}

// A stop id ends a completion with finish_reason "stop"; without LogProbs
// none are kept.
func TestGenerateStops(t *testing.T) {
	m, tok := tiny(t)
	all := make([]int, tok.VocabSize())
	for i := range all {
		all[i] = i
	}
	records := []completion.Record{{Prompt: "x"}}
	o := completion.Options{BatchSize: 1, Sample: model.SampleOptions{MaxNewTokens: 4, Stop: all}}
	if err := completion.Generate(context.Background(), m, tok, records, o, func([]completion.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if r := records[0]; len(r.IDs) != 1 || r.FinishReason != "stop" || r.LogProbs != nil {
		t.Errorf("record %+v, want one token, stopped, no log-probs", r)
	}
	if err := completion.Generate(context.Background(), m, tok, records, completion.Options{}, nil); err == nil {
		t.Error("batch size 0 accepted")
	}
}

// StopIDs holds the model's eos, the end-of-turn tokens and the extra ones
// the tokenizer has, sorted, each once.
func TestStopIDs(t *testing.T) {
	m, tok := tiny(t)
	var want []int
	for _, s := range []string{"<|im_end|>", "<|endoftext|>", "</tool_call>"} {
		id, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("no %s", s)
		}
		want = append(want, id)
	}
	if eos := tok.EOS(); eos >= 0 {
		want = append(want, eos)
	}
	want = append(want, m.Config.EOSIDs()...)
	slices.Sort(want)
	want = slices.Compact(want)
	if got := completion.StopIDs(m, tok, []string{"</tool_call>", "<no such token>"}); !slices.Equal(got, want) {
		t.Errorf("StopIDs %v, want %v", got, want)
	}
}

// TaskPrompts renders a task's system prompt and question, or without a
// system prompt the fixture's tools in the template's tool section.
func TestTaskPrompts(t *testing.T) {
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	fx, err := task.LoadFixture("../examples/fixtures/customers")
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandbox.NewFactory(context.Background(), fx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tasks := []task.Task{
		{ID: "a", Task: "How many customers?", SystemPrompt: "Answer briefly.", Fixture: fx.Name},
		{ID: "b", Task: "Lint main.py", Fixture: fx.Name},
	}
	recs, err := completion.TaskPrompts(tasks, map[string]*sandbox.Factory{fx.Name: f}, tpl, "t.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ID != "a" || recs[1].ID != "b" {
		t.Fatalf("records %+v", recs)
	}
	want := "<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\nHow many customers?<|im_end|>\n<|im_start|>assistant\n"
	if recs[0].Prompt != want {
		t.Errorf("prompt %q, want %q", recs[0].Prompt, want)
	}
	for _, tl := range f.Tools() {
		if !strings.Contains(recs[1].Prompt, `"name": "`+tl.Name+`"`) {
			t.Errorf("prompt without a system prompt does not show tool %s:\n%s", tl.Name, recs[1].Prompt)
		}
	}
}

// ChatPrompt renders a user turn, after the system message when one is
// given, up to the assistant's turn.
func TestChatPrompt(t *testing.T) {
	_, tpl, err := tokenizer.LoadWithTemplate("")
	if err != nil {
		t.Fatal(err)
	}
	got, err := completion.ChatPrompt(tpl, "", "How many?")
	if err != nil || !strings.HasSuffix(got, "<|im_start|>user\nHow many?<|im_end|>\n<|im_start|>assistant\n") || strings.Count(got, "<|im_start|>user") != 1 {
		t.Errorf("%q, %v", got, err)
	}
	got, err = completion.ChatPrompt(tpl, "Be brief.", "How many?")
	if want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHow many?<|im_end|>\n<|im_start|>assistant\n"; err != nil || got != want {
		t.Errorf("%q, %v; want %q", got, err, want)
	}
}
