// Package rollout runs the multi-turn agent loop: for each task it samples
// num_generations trajectories concurrently, each in its own sandbox fork,
// executing the policy's tool calls over MCP between turns.
package rollout
