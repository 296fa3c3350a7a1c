// Package task defines the task and fixture formats mcprl trains and
// evaluates on, and loads them from JSONL files and fixture directories.
package task

import "github.com/mcprl/mcprl/toolcall"

// Task is one line of a tasks JSONL file: the seed's three fields
// (system_prompt, task, ground_truth_assertions) plus optional ones.
type Task struct {
	ID                    string    `json:"id,omitempty"`
	SystemPrompt          string    `json:"system_prompt,omitempty"`
	Task                  string    `json:"task"`
	GroundTruthAssertions []string  `json:"ground_truth_assertions,omitempty"`
	Fixture               string    `json:"fixture,omitempty"`
	Golden                []Message `json:"golden,omitempty"`
	Category              string    `json:"category,omitempty"`
}

// Message is one chat message of a golden trajectory, in the OpenAI/HF chat
// form that chat templates render.
type Message struct {
	Role      string          `json:"role"`
	Content   string          `json:"content,omitempty"`
	ToolCalls []toolcall.Call `json:"tool_calls,omitempty"`
	Name      string          `json:"name,omitempty"`
}
