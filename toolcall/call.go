// Package toolcall parses tool calls out of model text in the Qwen/Hermes
// form <tool_call>{"name": ..., "arguments": {...}}</tool_call> and renders
// calls and tool catalogs back into text.
package toolcall

import "encoding/json"

// Call is one tool call: the tool's name and its arguments as the raw JSON
// object the model wrote (kept raw so that key order survives rendering).
type Call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}
