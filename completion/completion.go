package completion

import (
	"context"
	"fmt"
	"slices"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

// Record is one prompt and its completion: a line of mcprl generate's
// output.
type Record struct {
	// ID is the task's id when the prompt was rendered from a task.
	ID string `json:"id,omitempty"`
	// Prompt is the prompt's text, PromptIDs its ids.
	Prompt    string `json:"prompt"`
	PromptIDs []int  `json:"prompt_ids"`
	// Text is the completion's text, IDs its ids (a stop token included).
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
	// LogProbs are the sampled tokens' log-probs (with Options.LogProbs).
	LogProbs []float32 `json:"logprobs,omitempty"`
	// FinishReason is "stop" (a stop token) or "length" (the token budget
	// or the model's context ran out).
	FinishReason string `json:"finish_reason"`
}

// Options set how completions are sampled.
type Options struct {
	// Sample holds temperature, top_p, top_k, the token budget and the stop
	// ids (see StopIDs).
	Sample model.SampleOptions
	// BatchSize is the number of prompts sampled together (at least 1).
	BatchSize int
	// Seed seeds sampling: the batch starting at record i draws from
	// Seed+i, sequence j of a batch from its own stream of that.
	Seed uint64
	// LogProbs keeps each sampled token's log-prob in the record.
	LogProbs bool
}

// Generate samples a completion of every record's Prompt, o.BatchSize
// prompts at a time, fills in the rest of the record, and hands each
// finished batch to emit, in order, before sampling the next.
func Generate(ctx context.Context, m *model.Model, tok *tokenizer.Tokenizer, records []Record, o Options, emit func([]Record) error) error {
	if o.BatchSize < 1 {
		return fmt.Errorf("completion: batch size %d: want at least 1", o.BatchSize)
	}
	for start := 0; start < len(records); start += o.BatchSize {
		part := records[start:min(start+o.BatchSize, len(records))]
		prompts := make([][]int, len(part))
		for i := range part {
			part[i].PromptIDs = tok.Encode(part[i].Prompt)
			prompts[i] = part[i].PromptIDs
		}
		comps, err := m.Generate(ctx, prompts, o.Sample, o.Seed+uint64(start))
		if err != nil {
			return err
		}
		for i, c := range comps {
			r := &part[i]
			r.IDs, r.Text, r.FinishReason = c.Tokens, tok.Decode(c.Tokens), string(c.Stop)
			if r.FinishReason == string(model.StopCapacity) {
				r.FinishReason = string(model.StopLength)
			}
			if o.LogProbs {
				r.LogProbs = c.LogProbs
			}
		}
		if err := emit(part); err != nil {
			return err
		}
	}
	return nil
}

// TaskPrompts renders each task's prompt with tpl as a rollout's first
// turn renders it (rollout.PromptMessages: the task's system prompt, or the
// template's tool section with its fixture's tools from sandboxes). Errors
// name path and the task.
func TaskPrompts(tasks []task.Task, sandboxes map[string]*sandbox.Factory, tpl *tokenizer.Template, path string) ([]Record, error) {
	records := make([]Record, 0, len(tasks))
	for i := range tasks {
		t := &tasks[i]
		messages, tools := rollout.PromptMessages(t, sandboxes[t.Fixture])
		text, err := tpl.Render(messages, tools, true)
		if err != nil {
			return nil, fmt.Errorf("%s: task %q: %w", path, t.ID, err)
		}
		records = append(records, Record{ID: t.ID, Prompt: text})
	}
	return records, nil
}

// ChatPrompt renders user's message as a conversation's first user turn
// with tpl, after the system message system when it is not empty, up to
// the assistant's turn: the prompt of mcprl generate --chat.
func ChatPrompt(tpl *tokenizer.Template, system, user string) (string, error) {
	var msgs []chat.Message
	if system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: system})
	}
	return tpl.Render(append(msgs, chat.Message{Role: "user", Content: user}), nil, true)
}

// StopIDs are the ids that end a completion: the model's eos_token_id, the
// tokenizer's eos, <|im_end|> and <|endoftext|>, and those of the extra
// tokens the tokenizer has; sorted, each once.
func StopIDs(m *model.Model, tok *tokenizer.Tokenizer, extra []string) []int {
	ids := append(m.Config.EOSIDs(), tok.EOS())
	for _, s := range append([]string{"<|im_end|>", "<|endoftext|>"}, extra...) {
		if id, ok := tok.TokenID(s); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}
