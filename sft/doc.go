// Package sft fine-tunes a policy on golden trajectories: the supervised
// baseline GRPO must beat. A golden trajectory is replayed through the same
// rollout loop that GRPO samples with, against the live sandbox, so the
// tokens it trains on are exactly those a rollout would produce had the
// policy written the golden turns: the loss covers the assistant's tokens
// only, never the prompt or tool output.
package sft
