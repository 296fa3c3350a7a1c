package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/look"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

// Trigger names, as recovery_triggers lists them.
const (
	TriggerToolError     = "tool_error"     // a tool reported an error (an SQL error, a refusal, an unknown tool)
	TriggerMalformedCall = "malformed_call" // a <tool_call> block that did not parse
	TriggerEmptyResult   = "empty_result"   // a query_database result with no rows
	TriggerLintFailure   = "lint_failure"   // run_linter exited with a code other than 0
)

// AllTriggers lists every trigger, the default of recovery_triggers.
var AllTriggers = []string{TriggerToolError, TriggerMalformedCall, TriggerEmptyResult, TriggerLintFailure}

// Triggers says which observations are setbacks a trajectory may be
// branched at.
type Triggers struct {
	on map[string]bool
}

// NewTriggers returns the triggers named (each one of AllTriggers).
func NewTriggers(names []string) (*Triggers, error) {
	t := &Triggers{on: map[string]bool{}}
	for _, n := range names {
		ok := false
		for _, k := range AllTriggers {
			ok = ok || n == k
		}
		if !ok {
			return nil, fmt.Errorf("unknown recovery trigger %q (known: %s)", n, strings.Join(AllTriggers, ", "))
		}
		t.on[n] = true
	}
	return t, nil
}

// Match returns the trigger c is a setback for, or "" when it is none.
func (t *Triggers) Match(c chat.CallResult) string {
	switch {
	case c.ParseError != "":
		if t.on[TriggerMalformedCall] {
			return TriggerMalformedCall
		}
	case c.IsError:
		if t.on[TriggerToolError] {
			return TriggerToolError
		}
	case c.Call.Name == task.ToolQueryDatabase:
		if t.on[TriggerEmptyResult] && emptyResult(c) {
			return TriggerEmptyResult
		}
	case c.Call.Name == task.ToolRunLinter:
		if t.on[TriggerLintFailure] && lintFailed(c) {
			return TriggerLintFailure
		}
	}
	return ""
}

// emptyResult reports whether a query_database result has columns and no
// rows (a write's result has no columns).
func emptyResult(c chat.CallResult) bool {
	var r struct {
		Columns []string `json:"columns"`
		Rows    []any    `json:"rows"`
	}
	b, err := json.Marshal(c.Structured)
	if err != nil || json.Unmarshal(b, &r) != nil {
		return false
	}
	return len(r.Columns) > 0 && len(r.Rows) == 0
}

// lintFailed reports whether a run_linter result gives an exit code other
// than 0.
func lintFailed(c chat.CallResult) bool {
	var r struct {
		ExitCode *int `json:"exit_code"`
	}
	if b, err := json.Marshal(c.Structured); err == nil && json.Unmarshal(b, &r) == nil && r.ExitCode != nil {
		return *r.ExitCode != 0
	}
	i := strings.LastIndex(c.Text, "exit code ")
	return i >= 0 && strings.TrimSpace(c.Text[i+len("exit code "):]) != "0"
}

// Setback is where a trajectory met its first setback: the turn, the
// trigger, the prefix's length in tokens (through the setback's
// observation) and a fork of its sandbox as the setback left it, from
// which Runner.Branch continues.
type Setback struct {
	Turn    int    // index of the turn whose calls met the setback
	Trigger string // which trigger matched
	Len     int    // tokens of the prefix

	sb       *sandbox.Sandbox
	job      Job
	messages []chat.Message
	tools    []json.RawMessage
	offered  []json.RawMessage
	rounds   int
	look     string // the call that looks at what the setback suggests (lookAfter); "" when none
}

// Close releases the setback's sandbox fork. It may be called more than once.
func (s *Setback) Close() error {
	if s == nil || s.sb == nil {
		return nil
	}
	return s.sb.Close()
}

// lookAfter returns the call, as the chat template writes it, that looks at
// what a query_database setback suggests (look.After): for an SQL error or
// an empty result of a query it can read; "" otherwise. Its arguments are
// encoded as the task generator's goldens are ({"sql":"..."}, HTML left
// unescaped).
func lookAfter(c chat.CallResult, trigger string) string {
	if c.Call.Name != task.ToolQueryDatabase || c.ParseError != "" || (trigger != TriggerToolError && trigger != TriggerEmptyResult) {
		return ""
	}
	var args sandbox.QueryArgs
	if json.Unmarshal(c.Call.Arguments, &args) != nil {
		return ""
	}
	sql, ok := look.After(args.SQL, c.Text, trigger == TriggerToolError)
	if !ok {
		return ""
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(sandbox.QueryArgs{SQL: sql}) != nil {
		return ""
	}
	return toolcall.RenderCall(chat.Call{Name: task.ToolQueryDatabase, Arguments: bytes.TrimSpace(b.Bytes())})
}
