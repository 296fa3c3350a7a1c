// Package policy defines where a rollout's tokens come from: a batch of
// token sequences that the policy extends by sampling, and that the rollout
// extends with observation tokens between turns (token-in, token-out: what
// was sampled is never decoded and re-encoded).
//
// It holds only the interfaces: model.Policy samples from a model with a KV
// cache, rollout.Script replays scripted turns. A batch that is also
// Conversational reads each sequence's conversation (messages and tools)
// instead of its ids: package policy/openai continues conversations through
// an OpenAI-compatible chat-completions server.
package policy
