package chat

// Trajectory is one finished (or ended) attempt at a task: the text of every
// assistant turn, the calls it made and what the tools answered, and the
// token-level record the trainer needs. It does not point back at its task:
// whoever ran it knows which task it belongs to (rollout.Run returns a
// job's trajectories together).
type Trajectory struct {
	Turns []Turn
	// Answer is the text of the last assistant turn with its tool calls
	// removed: what the agent finally said.
	Answer string
	// Error records what ended the trajectory early (a crashed or hung tool
	// server, a sandbox failure, a database fork lost and reset under it);
	// empty when it ended normally. Such a trajectory is no fair sample of
	// the policy: trainers leave it out rather than score it.
	Error string
	// Truncated is true when the trajectory hit max_completion_length or
	// max_tool_calling_iterations instead of ending with end-of-turn.
	Truncated bool
	// Stopped is true when the policy itself ended its last turn without a
	// tool call (end-of-turn), so Answer is all it said, possibly nothing.
	// A rollout sets it; a trajectory rebuilt from tool calls alone (an
	// environment session, a replayed completion) leaves it false.
	Stopped bool

	// Token-level record (token-in, token-out): PromptLen prompt tokens,
	// then every sampled and observation token in order. Mask is 1 for a
	// token the policy sampled, 0 for prompt and tool-output tokens.
	// OldLogProbs holds the sampling policy's log-prob of each token (0 where
	// Mask is 0).
	Tokens      []int
	Mask        []uint8
	OldLogProbs []float32
	PromptLen   int
}

// Turn is one assistant message and the tool calls it triggered.
type Turn struct {
	// Text is the assistant text exactly as sampled (tool-call tags included).
	Text string
	// Calls are the tool calls parsed from Text, in order, each with its
	// result. A malformed call appears with ParseError set and no result.
	Calls []CallResult
}

// CallResult is one tool call and the observation it produced.
type CallResult struct {
	Call       Call
	ParseError string // non-empty when the call text could not be parsed
	IsError    bool   // the tool (or the protocol) reported an error
	Text       string // the observation text shown to the model
	// Structured is the tool's structured content (for query_database:
	// {"columns": [...], "rows": [[...]], ...}), nil when it had none.
	Structured any
	// NotRun marks a well-formed call written after the trajectory had used
	// every round of tool execution (max_tool_calling_iterations): recorded,
	// never executed, so it has no result and is no setback.
	NotRun bool
}

// Calls returns every well-formed tool call of the trajectory, in order.
func (t *Trajectory) Calls() []CallResult {
	var out []CallResult
	for _, turn := range t.Turns {
		for _, c := range turn.Calls {
			if c.ParseError == "" {
				out = append(out, c)
			}
		}
	}
	return out
}

// Completion returns the concatenated assistant text of every turn.
func (t *Trajectory) Completion() string {
	var s string
	for _, turn := range t.Turns {
		s += turn.Text
	}
	return s
}
