package task

import "github.com/mcprl/mcprl/chat"

// Task is one line of a tasks JSONL file: the seed's three fields
// (system_prompt, task, ground_truth_assertions) plus optional ones.
type Task struct {
	ID                    string   `json:"id,omitempty"`
	SystemPrompt          string   `json:"system_prompt,omitempty"`
	Task                  string   `json:"task"`
	GroundTruthAssertions []string `json:"ground_truth_assertions,omitempty"`
	// StateAssertions are what a task that asks for a change checks of the
	// database after the trajectory: SQL queries, each holding when its
	// first row's every cell is true (non-zero, non-NULL), such as
	// "SELECT COUNT(*) = 13 FROM customers WHERE status = 'inactive'". A
	// task without them is read-only: its ground truth is computed on the
	// fixture as it was built, and a write the trajectory makes counts
	// against it.
	StateAssertions []string `json:"state_assertions,omitempty"`
	// WitnessSQL are trusted statements (like the oracles) that change a
	// copy of the data so that the question's answer is not empty there:
	// for "which employees have Eva Lund as their manager?", whose answer
	// is none, one that makes Eva Lund someone's manager. Removing rows
	// cannot tell a query that answers such a question from any other that
	// returns nothing, or from SELECT 0, so a query that matched a SQL
	// oracle live must also match it on that copy (reward.Assertions).
	// mcprl tasks generate writes them for its questions with an empty
	// answer.
	WitnessSQL []string       `json:"witness_sql,omitempty"`
	Fixture    string         `json:"fixture,omitempty"`
	Golden     []chat.Message `json:"golden,omitempty"`
	Category   string         `json:"category,omitempty"`
}

// SharedSystemPrompt returns the system prompt every task has, or "" when
// the tasks have none or differ in it: the system prompt a model trained on
// them was trained with.
func SharedSystemPrompt(tasks []Task) string {
	if len(tasks) == 0 {
		return ""
	}
	p := tasks[0].SystemPrompt
	for _, t := range tasks[1:] {
		if t.SystemPrompt != p {
			return ""
		}
	}
	return p
}
