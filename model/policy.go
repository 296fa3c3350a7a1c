package model

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/mcprl/mcprl/policy"
)

// Policy samples from a Qwen2 model with a KV cache: one cached session per
// batch, prompts and observations fed through the model once.
type Policy struct {
	M *Model
	// Capacity is the number of cache slots of a batch's session (see
	// Session); it bounds the prompt chunk plus every sampled and
	// appended token of a batch.
	Capacity int
	// CompletionSlots, when > 0, sizes each batch's cache from its own
	// prompts instead of Capacity: the slots its prompts' batched feed takes,
	// plus CompletionSlots for everything after them (one slot per decoding
	// step of a Generate, and each observation feed's chunk): a rollout's
	// limits rather than max_prompt_length. The cache tensors grow with the
	// slots in use (Session), so the capacity bounds the sequences, not the
	// cost of a decoding step.
	CompletionSlots int
}

// CompletionSlots sizes the KV cache of a rollout batch after its prompts
// (Policy.CompletionSlots) for trajectories of at most maxCompletion sampled
// and observation tokens and iters tool rounds: the sampled tokens of every
// turn and an observation chunk per tool round. A batch that still runs out
// ends the sequences that wanted more as truncated.
func CompletionSlots(maxCompletion, iters int) int {
	return 2*maxCompletion + min(iters, 8)*Bucket(min(maxCompletion, maxChunk))
}

// feedSlots is the number of cache slots Session.Append takes to feed
// sequences of which the longest has n tokens.
func feedSlots(n int) int {
	slots := 0
	for n > 0 {
		c := min(n, maxChunk)
		slots += min(Bucket(c), maxChunk)
		n -= c
	}
	return slots
}

// NewBatch implements policy.Policy.
func (p *Policy) NewBatch(ctx context.Context, prompts [][]int, opts policy.SampleOptions) (policy.Batch, error) {
	if len(prompts) == 0 {
		return nil, fmt.Errorf("policy: no prompts")
	}
	capacity := p.Capacity
	if p.CompletionSlots > 0 {
		longest := 0
		for _, pr := range prompts {
			longest = max(longest, len(pr))
		}
		capacity = feedSlots(longest) + p.CompletionSlots
	}
	s, err := p.M.NewSession(len(prompts), capacity, uint64(opts.Seed))
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	b := &modelBatch{s: s, opts: opts, pending: make([][]int, len(prompts))}
	for i, pr := range prompts {
		b.pending[i] = slices.Clone(pr)
	}
	return b, nil
}

type modelBatch struct {
	s       *Session
	opts    policy.SampleOptions
	pending [][]int // tokens to feed before the next Generate
}

// Generate feeds every pending prompt or observation in one batched
// Append, then samples the sequences that got budget.
func (b *modelBatch) Generate(ctx context.Context, maxNew []int) ([]policy.Sample, error) {
	if len(maxNew) != len(b.pending) {
		return nil, fmt.Errorf("policy: %d budgets for %d sequences", len(maxNew), len(b.pending))
	}
	feed := make([][]int, len(b.pending))
	active := false
	for i, n := range maxNew {
		if n > 0 {
			if len(b.pending[i]) == 0 {
				return nil, fmt.Errorf("policy: sequence %d continues with nothing appended since its last turn", i)
			}
			feed[i] = b.pending[i]
			active = true
		}
	}
	for i, n := range maxNew {
		if n > 0 {
			b.pending[i] = nil
		}
	}
	out := make([]policy.Sample, len(maxNew))
	if !active {
		return out, nil
	}
	if err := b.s.Append(ctx, feed); err != nil {
		if errors.Is(err, ErrCapacity) {
			// The cache has no room for these prompts or observations
			// (the session is unchanged): every sequence that wanted to
			// continue ends here, out of budget, like one that ran out of
			// tokens; the run goes on.
			return out, nil
		}
		return nil, fmt.Errorf("policy: %w", err)
	}
	// Per-sequence budgets: a sequence never samples past its own budget
	// into the cache (tokens the trajectory would not keep).
	budgets := make([]int, len(maxNew))
	for i, n := range maxNew {
		budgets[i] = max(n, 0)
	}
	comps, err := b.s.Generate(ctx, SampleOptions{
		Temperature: b.opts.Temperature, TopP: b.opts.TopP, TopK: b.opts.TopK,
		MaxNewTokensPer: budgets, Stop: b.opts.StopIDs,
	})
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	for i, c := range comps {
		if maxNew[i] == 0 {
			continue
		}
		n := min(len(c.Tokens), maxNew[i])
		out[i] = policy.Sample{
			IDs:      slices.Clone(c.Tokens[:n]),
			LogProbs: append([]float32(nil), c.LogProbs[:n]...),
			Stopped:  c.Stop == StopToken && n == len(c.Tokens),
		}
	}
	return out, nil
}

// Append queues tokens for sequence i; they are fed with the next Generate,
// batched with every other sequence's.
func (b *modelBatch) Append(i int, tokens []int) error {
	if i < 0 || i >= len(b.pending) {
		return fmt.Errorf("policy: no sequence %d", i)
	}
	b.pending[i] = append(b.pending[i], tokens...)
	return nil
}

func (b *modelBatch) Close() error {
	b.s.Close()
	return nil
}
