// Package sampling holds how a policy samples and runs its tools, as one
// set of settings: temperature, top_p, top_k, the prompt and completion
// budgets, the rounds of tool calls and the system prompt. Training records
// them in a model folder (trainer_state.json's "generation"; the sampling
// keys also in generation_config.json), and every command that samples a
// model (chat, generate, eval, tasks distill) starts from them, so that a
// trained model samples as it was trained. It links neither GoMLX nor the
// MCP SDK.
package sampling
