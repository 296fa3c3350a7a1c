// Package distill builds supervised fine-tuning data by rejection
// sampling: a teacher (usually a large model behind a chat-completions
// server, package policy/openai) runs every task K times against its live
// sandbox, and each trajectory whose ground_truth_assertions all hold
// becomes a golden trajectory that mcprl sft replays.
//
// A trajectory is kept only when a golden reproduces it exactly: every
// turn's text is what task.GoldenTurns writes for the golden (content, then
// one well-formed call in Qwen2.5's form, or a final answer). A turn with a
// malformed call, text after its call, or a trajectory that was truncated
// or ended by a failure cannot be a demonstration and is left out, counted.
package distill
