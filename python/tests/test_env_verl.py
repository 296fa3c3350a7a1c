"""mcprl_env's verl tool and compute_score through verl 0.9.1's own classes, against a live `mcprl env serve`.

verl runs in an environment of its own (.verl-venv, made by scripts/verl-setup.sh from
python/verl-requirements.lock: verl 0.9.1 needs transformers<5.11, this environment pins 5.23 for TRL), so this test
starts the server here and runs verl_check.py there. It checks, with verl's code: the BaseTool subclass and
ToolResponse, verl's tool config loader (tool_registry.initialize_tools_from_config, load_all_tools) on
examples/verl/mcprl_tool_config.yaml, create / execute / calc_reward / release with verl's AgentData, verl's
ToolAgentLoop running two rollouts at once (hermes tool parser, Continuous Token builder, a create / execute /
release per call; one rollout's write never reaches the other's fork), and compute_score loaded by verl's
get_custom_reward_fn as pkg://mcprl_env.verl and as a file path.

What cannot run here: the LLM server behind ToolAgentLoop. verl generates through vLLM or SGLang replicas that its
AgentLoopManager starts as Ray actors on GPUs (this machine has none, and neither engine is in the lock), so the
server manager is a scripted stand-in returning fixed token ids of the real tokenizer (examples/trl/base's
Qwen2.5 template), and AgentLoopWorker, AgentLoopManager and the PPO trainer around them do not run.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest
from env_server import REPO, env_serve

VERL_PYTHON = REPO / ".verl-venv" / "bin" / "python"


def test_verl_itself(mcprl: pathlib.Path) -> None:
    if not VERL_PYTHON.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("no .verl-venv: scripts/test-setup.sh runs scripts/verl-setup.sh")
        pytest.skip("no .verl-venv (verl 0.9.1's own environment): run scripts/verl-setup.sh")
    with env_serve(mcprl, "--rewards", "assertions") as url:
        proc = subprocess.run(
            [str(VERL_PYTHON), str(REPO / "python" / "tests" / "verl_check.py"), url],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=600,
        )
    assert proc.returncode == 0, f"verl_check.py exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["verl"] == "0.9.1"
    assert summary["agent_loop"]["turns"] == [6, 4]
    assert summary["scores"] == [1.0, 0.0, 1.0, 0.0]
    assert all(0.0 <= r <= 1.0 for r in [summary["calc_reward"], *summary["agent_loop"]["rewards"]])
