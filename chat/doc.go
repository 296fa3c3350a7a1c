// Package chat holds the conversation types every other package speaks:
// a chat Message and a tool Call, and a rollout's Trajectory of assistant
// Turns with each call's CallResult. It imports nothing but the standard
// library, so data packages (tasks, tool calls, rewards, tokens) can share
// them without linking the sandbox, the policy or the tensor engine.
package chat
