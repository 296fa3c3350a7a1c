package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
)

// Policy samples turns from a served model. Its batches are
// policy.Conversational: the rollout must give every sequence its
// conversation before each Generate (rollout.Runner does).
type Policy struct {
	Client *Client
	// Tokenizer encodes each reply into the ids the rollout records and
	// counts budgets in. The served model's own tokenizer keeps them exact;
	// another one counts approximately (max_tokens, sent to the server, is
	// the budget in whatever the rollout counts).
	Tokenizer *tokenizer.Tokenizer
	// ToolsAsPrompted sends a request's tools only where the rollout's own
	// prompt shows them through the chat template (tasks without a system
	// prompt), so that the server renders the prompt an in-process policy
	// sees. By default every request sends the sandbox's tools, which
	// servers need to parse tool calls natively.
	ToolsAsPrompted bool
	// MaxCallsPerTurn caps the tool calls one reply may make, native calls
	// and <tool_call> blocks in its text alike (DefaultMaxCallsPerTurn when
	// zero): the reply is cut after the last call kept, so that a server
	// answering 100 calls does not have them all run. An in-process policy
	// stops a turn at its first call.
	MaxCallsPerTurn int
}

// DefaultMaxCallsPerTurn is Policy.MaxCallsPerTurn's default.
const DefaultMaxCallsPerTurn = 16

// bytesPerToken bounds the bytes a reply may have per token of its
// max_tokens: a server that ignores max_tokens has its reply cut there (and
// read as cut off by the budget) instead of kept and encoded whole. No
// tokenizer's tokens average near it.
const bytesPerToken = 64

// NewBatch implements policy.Policy. opts.StopIDs must hold the id of
// </tool_call> and an end-of-turn id (the rollout's stop ids do): a reply
// that ends in a tool call ends with the first, a final answer with the
// first stop id that is not </tool_call>.
func (p *Policy) NewBatch(ctx context.Context, prompts [][]int, opts policy.SampleOptions) (policy.Batch, error) {
	if p.Client == nil || p.Tokenizer == nil {
		return nil, errors.New("openai policy: needs a Client and a Tokenizer")
	}
	id, ok := p.Tokenizer.TokenID(toolcall.CloseTag)
	if !ok {
		return nil, fmt.Errorf("openai policy: the tokenizer has no %s token", toolcall.CloseTag)
	}
	b := &batch{p: p, opts: opts, toolStop: id, endTurn: -1, seqs: make([]sequence, len(prompts))}
	for _, s := range opts.StopIDs {
		if s != b.toolStop {
			b.endTurn = s
			break
		}
	}
	if b.endTurn < 0 {
		return nil, errors.New("openai policy: no end-of-turn stop id among the sampling options' stop ids")
	}
	return b, nil
}

type batch struct {
	p                 *Policy
	opts              policy.SampleOptions
	toolStop, endTurn int
	seqs              []sequence
}

// sequence is one conversation in flight.
type sequence struct {
	conv    policy.Conversation
	set     bool
	replies []reply // this batch's replies, one per assistant message of conv, in order
}

// reply is what the server answered for one assistant turn: its native
// tool calls (ids included), which go back to the server in that form.
type reply struct {
	content string
	calls   []ToolCall
}

// SetConversation implements policy.Conversational.
func (b *batch) SetConversation(i int, c policy.Conversation) error {
	if i < 0 || i >= len(b.seqs) {
		return fmt.Errorf("openai policy: no sequence %d", i)
	}
	b.seqs[i].conv, b.seqs[i].set = c, true
	return nil
}

// Generate implements policy.Batch: one request per sequence to continue,
// concurrently (the client bounds the requests in flight). Sequences that
// start from the same conversation go in one request with n set; a server
// that answers fewer choices (transformers serve ignores n) is asked again
// for the rest, one request each. A request that fails after its retries
// fails only its sequences (Sample.Err).
func (b *batch) Generate(ctx context.Context, maxNew []int) ([]policy.Sample, error) {
	if len(maxNew) != len(b.seqs) {
		return nil, fmt.Errorf("openai policy: %d budgets for %d sequences", len(maxNew), len(b.seqs))
	}
	out := make([]policy.Sample, len(b.seqs))
	groups := map[string][]int{}
	var order []string
	for i, n := range maxNew {
		if n <= 0 {
			continue
		}
		s := &b.seqs[i]
		if !s.set {
			return nil, fmt.Errorf("openai policy: sequence %d has no conversation (the rollout sets it before Generate)", i)
		}
		key := fmt.Sprint("seq", i)
		if len(s.replies) == 0 {
			if k, err := json.Marshal(struct {
				C policy.Conversation
				N int
			}{s.conv, n}); err == nil {
				key = string(k)
			}
		}
		if groups[key] == nil {
			order = append(order, key)
		}
		groups[key] = append(groups[key], i)
	}
	var wg sync.WaitGroup
	for _, key := range order {
		idx := groups[key]
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.generate(ctx, idx, maxNew[idx[0]], out)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// generate samples one turn for every sequence of idx (all in the same
// conversation) into out.
func (b *batch) generate(ctx context.Context, idx []int, maxNew int, out []policy.Sample) {
	first := idx[0]
	req := b.request(first, maxNew)
	pending := idx
	for len(pending) > 0 {
		if len(pending) > 1 {
			req.N = len(pending)
		} else {
			req.N = 0
		}
		seed := b.opts.Seed + int64(pending[0])*7919 + int64(len(b.seqs[pending[0]].replies))
		req.Seed = &seed
		resp, err := b.p.Client.Complete(ctx, req)
		if err != nil {
			for _, i := range pending {
				out[i] = policy.Sample{Err: err}
			}
			return
		}
		got := 0
		for _, ch := range resp.Choices {
			if got == len(pending) {
				break
			}
			i := pending[got]
			got++
			if ch.Message == nil {
				out[i] = policy.Sample{Err: fmt.Errorf("the server's choice %d has no message (null): not an answer", ch.Index)}
				continue
			}
			sample, r := b.sample(ch, maxNew)
			out[i] = sample
			b.seqs[i].replies = append(b.seqs[i].replies, r)
		}
		pending = pending[got:]
	}
}

// request builds the request that continues sequence i.
func (b *batch) request(i, maxNew int) *Request {
	s := &b.seqs[i]
	req := sampling(b.opts)
	req.Messages, req.MaxTokens = b.messages(s), maxNew
	if s.conv.ToolsInPrompt || !b.p.ToolsAsPrompted {
		req.Tools = s.conv.Tools
	}
	return &req
}

// sampling is a request with opts' sampling settings: temperature (0:
// greedy), top_p when below 1, top_k when set, and </tool_call> as a stop
// string (a turn ends at its first call, as in-process sampling does).
func sampling(opts policy.SampleOptions) Request {
	t := opts.Temperature
	req := Request{Temperature: &t, TopK: opts.TopK, Stop: []string{toolcall.CloseTag}}
	if p := opts.TopP; p > 0 && p < 1 {
		req.TopP = &p
	}
	return req
}

// Check probes the server (Client.Check) with a request that carries tools
// and opts' sampling settings, so that a setting the server refuses fails
// here, before any work starts.
func (p *Policy) Check(ctx context.Context, tools []json.RawMessage, opts policy.SampleOptions) error {
	return p.Client.Check(ctx, tools, sampling(opts))
}

// messages converts a conversation to the API's form. An assistant turn
// the server answered with native tool calls goes back in that form, and
// the tool results after it carry the calls' ids; any other message goes
// as the rollout wrote it.
func (b *batch) messages(s *sequence) []Message {
	out := make([]Message, 0, len(s.conv.Messages))
	turn := 0
	var ids []string // tool_call ids awaiting their results
	for _, m := range s.conv.Messages {
		switch m.Role {
		case "assistant":
			ids = nil
			var r *reply
			if turn < len(s.replies) {
				r = &s.replies[turn]
			}
			turn++
			if r != nil && len(r.calls) > 0 {
				out = append(out, Message{Role: "assistant", Content: r.content, ToolCalls: r.calls})
				for _, c := range r.calls {
					ids = append(ids, c.ID)
				}
				continue
			}
			out = append(out, Message{Role: "assistant", Content: m.Content})
		case "tool":
			msg := Message{Role: "tool", Content: m.Content}
			if len(ids) > 0 && ids[0] != "" {
				msg.ToolCallID = ids[0]
				ids = ids[1:]
			} else {
				msg.Name = m.Name
			}
			out = append(out, msg)
		default:
			out = append(out, Message{Role: m.Role, Content: m.Content})
		}
	}
	return out
}

// sample turns one choice into the ids the rollout records: the text (the
// content, then native calls as <tool_call> blocks), ending with
// </tool_call> when the turn calls a tool, with the end-of-turn id when it
// answers, and unstopped when the server ran out of max_tokens. A reply
// longer than maxNew tokens could be (bytesPerToken) is cut there and
// read as run out of max_tokens; one with more calls than MaxCallsPerTurn
// is cut after the last call kept.
func (b *batch) sample(ch Choice, maxNew int) (policy.Sample, reply) {
	content := ""
	if ch.Message.Content != nil {
		content = *ch.Message.Content
	}
	finish := ch.FinishReason
	limit := max(maxNew, 1) * bytesPerToken
	if len(content) > limit {
		content, finish = cutUTF8(content, limit), "length"
	}
	calls := ch.Message.ToolCalls
	most := b.p.MaxCallsPerTurn
	if most <= 0 {
		most = DefaultMaxCallsPerTurn
	}
	if len(calls) > most {
		calls = calls[:most]
	}
	r := reply{content: content}
	text := content
	if len(calls) > 0 && finish != "length" {
		r.calls = calls
		text = Text(content, calls)
		if len(text) > limit {
			// Arguments past the budget: the turn ran out of max_tokens.
			text, r.calls, finish = cutUTF8(text, limit), nil, "length"
		}
	} else if finish == "stop" && unclosedCall(text) {
		// The server stopped at </tool_call> and, as OpenAI's API does,
		// left the stop string out.
		text += toolcall.CloseTag
	}
	if len(r.calls) == 0 && strings.Count(text, toolcall.CloseTag) > most {
		// More <tool_call> blocks in the text than a turn may make: cut
		// after the last one kept.
		if ps := toolcall.Parse(text); len(ps) > most {
			text = text[:ps[most-1].End]
		}
	}
	ids := b.p.Tokenizer.Encode(text)
	s := policy.Sample{IDs: ids}
	switch {
	case strings.HasSuffix(text, toolcall.CloseTag) && finish != "length":
		s.Stopped = true
		if len(ids) == 0 || ids[len(ids)-1] != b.toolStop {
			s.IDs = append(s.IDs, b.toolStop)
		}
	case finish == "length":
	default:
		s.Stopped = true
		s.IDs = append(s.IDs, b.endTurn)
	}
	s.LogProbs = make([]float32, len(s.IDs))
	return s, r
}

// Text writes a reply with native tool calls as the text a Qwen2.5-style
// model writes: the content, then each call as Qwen2.5's chat template
// renders it (<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>),
// one per line.
func Text(content string, calls []ToolCall) string {
	var b strings.Builder
	b.WriteString(content)
	for k, c := range calls {
		if k > 0 || content != "" {
			b.WriteByte('\n')
		}
		args := json.RawMessage(c.Function.Arguments)
		if !json.Valid(args) {
			// Not JSON: kept as a JSON string, so the call still parses and the
			// tool reports the bad arguments.
			q, _ := json.Marshal(c.Function.Arguments)
			args = q
		}
		b.WriteString(toolcall.RenderCall(chat.Call{Name: c.Function.Name, Arguments: args}))
	}
	return b.String()
}

// cutUTF8 returns s cut to at most n bytes, at a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// unclosedCall reports whether text ends inside a <tool_call> block.
func unclosedCall(text string) bool {
	open := strings.LastIndex(text, toolcall.OpenTag)
	return open >= 0 && strings.LastIndex(text, toolcall.CloseTag) < open
}

// Append implements policy.Batch. The observation reaches the server as the
// conversation's tool messages (SetConversation), not as ids.
func (b *batch) Append(i int, tokens []int) error {
	if i < 0 || i >= len(b.seqs) {
		return fmt.Errorf("openai policy: no sequence %d", i)
	}
	return nil
}

// Close implements policy.Batch.
func (b *batch) Close() error { return nil }
