package chat

import "encoding/json"

// Call is one tool call: the tool's name and its arguments as the raw JSON
// object the model wrote (kept raw so that key order survives rendering).
type Call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Message is one chat message, in the OpenAI/HF chat form that chat
// templates render: a task's golden trajectory and a rollout's prompt and
// observations are lists of them.
type Message struct {
	Role      string `json:"role"`
	Content   string `json:"content,omitempty"`
	ToolCalls []Call `json:"tool_calls,omitempty"`
	Name      string `json:"name,omitempty"`
}
