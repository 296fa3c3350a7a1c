package task

import (
	"fmt"

	"github.com/mcprl/mcprl/chat"
)

// GoldenTurns returns the assistant turns of a task's golden trajectory as the text the policy should write:
// content, then each tool call as renderCall writes it (toolcall.RenderCall: the Qwen/Hermes form ending with
// </tool_call>, where sampling stops, so each call is one turn), and the final answer ending with <|im_end|>.
// SFT trains on these turns, eval's golden policy and distillation replay them. The renderer is a parameter
// because the one home of the <tool_call> form, toolcall, links the MCP SDK, which this package does not.
func GoldenTurns(t *Task, renderCall func(chat.Call) string) ([]string, error) {
	var turns []string
	for i, m := range t.Golden {
		if m.Role != "assistant" {
			continue
		}
		// Sampling stops at </tool_call>, so each call is a turn of its own.
		for j, c := range m.ToolCalls {
			text := renderCall(c)
			if j == 0 && m.Content != "" {
				text = m.Content + "\n" + text
			}
			turns = append(turns, text)
		}
		if len(m.ToolCalls) == 0 {
			if i != len(t.Golden)-1 {
				return nil, fmt.Errorf("task %q: golden message %d: an assistant message without tool calls must be the last", t.ID, i)
			}
			turns = append(turns, m.Content+"<|im_end|>")
		}
	}
	if len(turns) == 0 {
		return nil, fmt.Errorf("task %q: no golden assistant turns", t.ID)
	}
	return turns, nil
}
