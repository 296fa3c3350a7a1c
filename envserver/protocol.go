package envserver

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/sandbox"
)

// Error codes of OpenEnv's WebSocket protocol (WSErrorCode in
// openenv/core/env_server/types.py).
const (
	CodeInvalidJSON     = "INVALID_JSON"
	CodeUnknownType     = "UNKNOWN_TYPE"
	CodeValidation      = "VALIDATION_ERROR"
	CodeExecution       = "EXECUTION_ERROR"
	CodeCapacityReached = "CAPACITY_REACHED"
	CodeSession         = "SESSION_ERROR"
)

// Message types of the WebSocket protocol.
const (
	typeReset       = "reset"
	typeStep        = "step"
	typeState       = "state"
	typeClose       = "close"
	typeMCP         = "mcp"
	typeFork        = "fork"
	typeObservation = "observation"
	typeError       = "error"
)

// Step action types: OpenEnv's MCP actions (CallToolAction, ListToolsAction)
// and mcprl's finish, which ends the episode with its reward.
const (
	ActionCallTool  = "call_tool"
	ActionListTools = "list_tools"
	ActionFinish    = "finish"
)

// protoError is an error answered to the client with an OpenEnv code.
type protoError struct {
	Code    string
	Message string
	Errors  []FieldError
}

func (e *protoError) Error() string { return e.Code + ": " + e.Message }

// FieldError locates one validation failure, in pydantic's form.
type FieldError struct {
	Loc  []string `json:"loc"`
	Msg  string   `json:"msg"`
	Type string   `json:"type"`
}

func validation(field, msg string) *protoError {
	return &protoError{Code: CodeValidation, Message: "Invalid message: " + field + ": " + msg,
		Errors: []FieldError{{Loc: []string{field}, Msg: msg, Type: "value_error"}}}
}

func execution(format string, args ...any) *protoError {
	return &protoError{Code: CodeExecution, Message: fmt.Sprintf(format, args...)}
}

// response is one message the server sends on /ws.
type response struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

func errorResponse(e *protoError) response {
	data := map[string]any{"message": e.Message, "code": e.Code}
	if len(e.Errors) > 0 {
		data["errors"] = e.Errors
	}
	return response{Type: typeError, Data: data}
}

// StepResult is an observation as OpenEnv serializes it
// (serialize_observation): the observation's own fields, the reward (null
// until the episode is scored) and done.
type StepResult struct {
	Observation any      `json:"observation"`
	Reward      *float64 `json:"reward"`
	Done        bool     `json:"done"`
}

// Tool is one tool of the catalog as OpenEnv's MCP types describe it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ResetObservation starts an episode: what the agent is told.
type ResetObservation struct {
	EpisodeID string `json:"episode_id"`
	TaskID    string `json:"task_id"`
	Fixture   string `json:"fixture"`
	// SystemPrompt is the task's system prompt, or, when it has none, the
	// tool catalog in compute_mcp_reward's form.
	SystemPrompt string `json:"system_prompt"`
	Task         string `json:"task"`
	// Tools is the catalog (so OpenEnv's MCPToolClient reads a reset as a
	// tool listing); ToolSchemas is the same in the OpenAI function form
	// that chat templates render.
	Tools       []Tool            `json:"tools"`
	ToolSchemas []json.RawMessage `json:"tool_schemas"`
	// ForkOf is the fork id an episode reset from a fork started from, and
	// StepCount the steps it starts with (the forked episode's).
	ForkOf    string `json:"fork_of,omitempty"`
	StepCount int    `json:"step_count,omitempty"`
}

// ListToolsObservation answers {"type": "list_tools"}.
type ListToolsObservation struct {
	Tools []Tool `json:"tools"`
}

// CallToolObservation answers a call_tool action, as OpenEnv's
// CallToolObservation: a tool's own failure is in Result (IsError); Error is
// set only when the tool server failed or timed out.
type CallToolObservation struct {
	ToolName string      `json:"tool_name"`
	Result   *ToolResult `json:"result"`
	Error    *ToolError  `json:"error"`
}

// ToolResult is the MCP CallToolResult plus Data, the text the model reads:
// exactly the observation an in-process rollout appends to the trajectory.
// OpenEnv's MCPToolClient.call_tool returns Data.
type ToolResult struct {
	Data              string          `json:"data"`
	IsError           bool            `json:"isError"`
	Content           json.RawMessage `json:"content"`
	StructuredContent any             `json:"structuredContent,omitempty"`
}

// ToolError is OpenEnv's ToolError (error_type: transport_error, timeout,
// tool_not_found, invalid_args, execution_error).
type ToolError struct {
	ErrorType string `json:"error_type"`
	Message   string `json:"message"`
}

// FinishObservation ends an episode with its scores.
type FinishObservation struct {
	// Rewards holds each configured reward's value by name, and "compute_mcp_reward",
	// the user's compute_mcp_reward on the completion text.
	Rewards map[string]float64 `json:"rewards"`
	// Breakdown explains the configured reward (reward.Breakdown).
	Breakdown json.RawMessage `json:"breakdown"`
	ToolCalls int             `json:"tool_calls"`
	// Truncated is set when a replay stopped at the server's limit on
	// calls (--max-replay-calls): the calls after it were not run, and the
	// episode was scored as a truncated trajectory.
	Truncated bool `json:"truncated,omitempty"`
}

// State is the session's state: OpenEnv's State fields (episode_id,
// step_count) and the episode's reward so far.
type State struct {
	EpisodeID *string            `json:"episode_id"`
	StepCount int                `json:"step_count"`
	TaskID    string             `json:"task_id,omitempty"`
	Fixture   string             `json:"fixture,omitempty"`
	ToolCalls int                `json:"tool_calls"`
	Done      bool               `json:"done"`
	Reward    *float64           `json:"reward"`
	Rewards   map[string]float64 `json:"rewards,omitempty"`
	Error     string             `json:"error,omitempty"`
}

func toolsOf(tools []*mcp.Tool) []Tool {
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = []byte(`{"type":"object","properties":{}}`)
		}
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out
}

// toolResult converts an MCP result into the observation's result.
func toolResult(res *mcp.CallToolResult) *ToolResult {
	content, err := json.Marshal(res.Content)
	if err != nil || string(content) == "null" {
		content = []byte("[]")
	}
	return &ToolResult{Data: sandbox.ResultText(res), IsError: res.IsError, Content: content, StructuredContent: res.StructuredContent}
}

// Schemas are the JSON schemas /schema serves, for the action, observation
// and state of this environment.
var schemas = json.RawMessage(`{
"action": {"title": "Action", "oneOf": [
  {"title": "CallToolAction", "type": "object", "additionalProperties": false, "required": ["type", "tool_name"],
   "properties": {"type": {"const": "call_tool"}, "tool_name": {"type": "string"}, "arguments": {"type": "object"}, "metadata": {"type": "object"}}},
  {"title": "ListToolsAction", "type": "object", "additionalProperties": false, "required": ["type"],
   "properties": {"type": {"const": "list_tools"}, "metadata": {"type": "object"}}},
  {"title": "FinishAction", "type": "object", "additionalProperties": false, "required": ["type"],
   "properties": {"type": {"const": "finish"}, "metadata": {"type": "object"},
     "completion": {"description": "the agent's completion: its text (tool-call tags included) or its messages", "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
     "replay": {"type": "boolean", "description": "run the completion's tool calls in the episode's fork before scoring"}}}
]},
"observation": {"title": "Observation", "type": "object", "properties": {
  "episode_id": {"type": "string"}, "task_id": {"type": "string"}, "fixture": {"type": "string"},
  "system_prompt": {"type": "string"}, "task": {"type": "string"},
  "tools": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "input_schema": {"type": "object"}}}},
  "tool_schemas": {"type": "array", "items": {"type": "object"}},
  "tool_name": {"type": "string"},
  "result": {"type": ["object", "null"], "properties": {"data": {"type": "string"}, "isError": {"type": "boolean"}, "content": {"type": "array"}, "structuredContent": {}}},
  "error": {"type": ["object", "null"], "properties": {"error_type": {"type": "string"}, "message": {"type": "string"}}},
  "rewards": {"type": "object", "additionalProperties": {"type": "number"}},
  "breakdown": {"type": "object"}, "tool_calls": {"type": "integer"}, "truncated": {"type": "boolean"},
  "done": {"type": "boolean"}, "reward": {"type": ["number", "null"]}}},
"state": {"title": "State", "type": "object", "properties": {
  "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer", "minimum": 0},
  "task_id": {"type": "string"}, "fixture": {"type": "string"}, "tool_calls": {"type": "integer"},
  "done": {"type": "boolean"}, "reward": {"type": ["number", "null"]},
  "rewards": {"type": "object", "additionalProperties": {"type": "number"}}, "error": {"type": "string"}}}
}`)
