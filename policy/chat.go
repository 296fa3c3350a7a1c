package policy

import (
	"encoding/json"

	"github.com/mcprl/mcprl/chat"
)

// Conversation is a sequence's chat so far, as a chat API reads it: the
// messages (system prompt, task, then each assistant turn and its tool
// results) and the tools the sandbox offers, as OpenAI function schemas.
type Conversation struct {
	Messages []chat.Message
	Tools    []json.RawMessage
	// ToolsInPrompt is true when the rollout's own prompt shows Tools
	// through the chat template's tool section; false when the task's
	// system prompt describes them instead.
	ToolsInPrompt bool
}

// Conversational is implemented by batches that continue conversations
// rather than token sequences: a model served behind a chat API reads
// messages, not ids. Before each Generate the rollout gives every sequence
// it asks to continue its conversation so far; the batch still returns the
// ids of what was sampled (in the rollout's tokenizer), so the trajectory's
// record and budgets stay token-level.
type Conversational interface {
	Batch
	SetConversation(i int, c Conversation) error
}
