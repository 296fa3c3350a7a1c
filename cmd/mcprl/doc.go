// Command mcprl trains LLM agents to call Model Context Protocol tools with
// reinforcement learning (GRPO) against a live MCP sandbox.
package main
