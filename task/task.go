package task

import "github.com/mcprl/mcprl/chat"

// Task is one line of a tasks JSONL file: the seed's three fields
// (system_prompt, task, ground_truth_assertions) plus optional ones.
type Task struct {
	ID                    string         `json:"id,omitempty"`
	SystemPrompt          string         `json:"system_prompt,omitempty"`
	Task                  string         `json:"task"`
	GroundTruthAssertions []string       `json:"ground_truth_assertions,omitempty"`
	Fixture               string         `json:"fixture,omitempty"`
	Golden                []chat.Message `json:"golden,omitempty"`
	Category              string         `json:"category,omitempty"`
}
