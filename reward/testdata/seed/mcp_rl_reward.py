# mcp_rl_reward.py
import json
import re

def compute_mcp_reward(completions, ground_truth, **kwargs) -> list[float]:
    """
    Reward function scoring MCP tool calling trajectories:
    1. Schema Syntax: Valid JSON-RPC structure (+0.3)
    2. Correct Tool Selection (+0.3)
    3. Correct Execution Outcome (+0.4)
    4. Penalty for Hallucinated Tools (-0.5)
    """
    rewards = []

    for text in completions:
        score = 0.0

        # Check for tool call tags <tool_call>{...}</tool_call>
        match = re.search(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL)
        if not match:
            rewards.append(0.0)
            continue

        raw_json = match.group(1).strip()
        try:
            call_obj = json.loads(raw_json)
        except json.JSONDecodeError:
            rewards.append(0.1)  # Partial credit for attempting format
            continue

        score += 0.3  # Valid JSON schema syntax

        tool_name = call_obj.get("name")
        args = call_obj.get("arguments", {})

        # Verify against allowed tools catalog
        if tool_name not in ["query_database", "run_linter"]:
            rewards.append(-0.5)  # Penalty for hallucination
            continue

        score += 0.3  # Correct known tool

        # Verify task-specific arguments
        if tool_name == "query_database" and "inactive" in args.get("sql", "").lower():
            score += 0.4  # Successfully formulated the expected query

        rewards.append(score)

    return rewards
