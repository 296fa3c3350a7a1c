package policy

import "context"

// SampleOptions are the sampling knobs, with TRL's names and meaning.
type SampleOptions struct {
	Temperature float64 // 0 means greedy
	TopP        float64 // 1 (or 0) disables nucleus filtering
	TopK        int     // 0 disables top-k filtering
	// StopIDs end a sequence's turn when sampled (the stop token is kept as
	// the turn's last token): end-of-turn, end-of-text, </tool_call>.
	StopIDs []int
	Seed    int64
}

// Policy starts batches of sequences.
type Policy interface {
	// NewBatch starts one sequence per prompt. Token ids, here and in Batch
	// and Sample, are the tokenizer's (tokenizer.Encode's []int).
	NewBatch(ctx context.Context, prompts [][]int, opts SampleOptions) (Batch, error)
}

// Batch is a set of sequences that grow by sampling and by appended tokens.
type Batch interface {
	// Generate samples a continuation of every sequence i with maxNew[i] > 0,
	// until a stop token or maxNew[i] tokens; sequences with maxNew[i] == 0
	// are left as they are and get an empty Sample.
	Generate(ctx context.Context, maxNew []int) ([]Sample, error)
	// Append appends tokens (a tool's observation) to sequence i; the next
	// Generate continues after them.
	Append(i int, tokens []int) error
	// Close releases the batch's resources (KV caches).
	Close() error
}

// Sample is one sequence's sampled continuation.
type Sample struct {
	IDs []int
	// LogProbs[j] is the sampling policy's log-probability of IDs[j].
	LogProbs []float32
	// Stopped is true when the continuation ended with a stop token, false
	// when it ran out of its token budget.
	Stopped bool
	// Err, when set, says why the policy could not continue this one
	// sequence (a served model's request failed after its retries): the
	// rollout ends that trajectory with the reason as its Error and goes on
	// with the others.
	Err error
}
