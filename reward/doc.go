// Package reward scores finished trajectories. A Func turns one trajectory
// (its text, tool calls and their results, and the live sandbox it ran in)
// into a Score with a breakdown; Weighted composes several named Funcs the
// way TRL sums reward_funcs with reward_weights; a Registry builds them by
// name ("compute_mcp_reward", "assertions", "format", "tool_selection", "execution",
// "hallucination", "verifiable").
package reward
