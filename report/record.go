package report

import "github.com/mcprl/mcprl/chat"

// Completion is one trajectory sampled at a logging step of a training run: one JSON line of
// completions.jsonl (TRL logs the same as its completions table).
type Completion struct {
	Step int `json:"step"`
	// Group is the prompt's index in the generation batch, Index the trajectory's index in its group.
	Group    int    `json:"group"`
	Index    int    `json:"index"`
	TaskID   string `json:"task_id"`
	Category string `json:"category,omitempty"`
	// Prompt is the task as the policy was asked it.
	Prompt    string            `json:"prompt"`
	Turns     []chat.TurnRecord `json:"turns"`
	Truncated bool              `json:"truncated,omitempty"`
	// Error is what ended the trajectory early.
	Error string `json:"error,omitempty"`
	// Rewards holds each reward function's score (null when undefined), Reward their weighted sum and
	// Advantage the trajectory's advantage within its group; all absent where nothing scored the
	// trajectory (the golden trajectories an SFT step trained on).
	Rewards   map[string]*float64 `json:"rewards,omitempty"`
	Reward    *float64            `json:"reward,omitempty"`
	Advantage *float64            `json:"advantage,omitempty"`
	// BranchOf is, for a recovery branch (a continuation sampled from a trajectory's setback), the Index
	// of its root in the same Group; BranchTurn is how many of its turns are the root's (the turns up to
	// and including the setback's) and BranchTrigger what the setback was. Its Advantage is within its
	// branch group.
	BranchOf      *int   `json:"branch_of,omitempty"`
	BranchTurn    int    `json:"branch_turn,omitempty"`
	BranchTrigger string `json:"branch_trigger,omitempty"`
	// BranchForced marks a continuation made to retry: its first turn started with the tool-call
	// opener (recovery_forced_call_ratio), or with a whole look (recovery_forced_look), which the
	// policy did not sample.
	BranchForced bool `json:"branch_forced,omitempty"`
	// BranchForcedLook marks a forced continuation whose first turn is the whole look (recovery_forced_look).
	BranchForcedLook bool `json:"branch_forced_look,omitempty"`
}
