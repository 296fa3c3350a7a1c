package chat

import "encoding/json"

// TurnRecord is an assistant turn as saved for inspection (one element of the "turns" of a saved
// trajectory: mcprl eval's trajectories.jsonl, a training run's completions.jsonl).
type TurnRecord struct {
	Text  string       `json:"text"`
	Calls []CallRecord `json:"calls,omitempty"`
}

// CallRecord is one tool call as saved: its name, its arguments (omitted when they are not valid
// JSON), why it could not be parsed, whether the tool failed, what it returned, and whether it ran at all.
type CallRecord struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	ParseError string          `json:"parse_error,omitempty"`
	IsError    bool            `json:"is_error,omitempty"`
	Result     string          `json:"result"`
	NotRun     bool            `json:"not_run,omitempty"`
}

// Records returns the trajectory's turns as saved for inspection (never nil).
func (t *Trajectory) Records() []TurnRecord {
	out := []TurnRecord{}
	for _, turn := range t.Turns {
		rt := TurnRecord{Text: turn.Text}
		for _, c := range turn.Calls {
			rc := CallRecord{Name: c.Call.Name, ParseError: c.ParseError, IsError: c.IsError, Result: c.Text, NotRun: c.NotRun}
			if json.Valid(c.Call.Arguments) {
				rc.Arguments = c.Call.Arguments
			}
			rt.Calls = append(rt.Calls, rc)
		}
		out = append(out, rt)
	}
	return out
}
