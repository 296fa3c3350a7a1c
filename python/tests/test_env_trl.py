"""End to end: the user's TRL script (examples/trl/train_mcp_grpo.py) trains with TRL's own GRPOTrainer against
`mcprl env serve`, its policy writes tool calls that run in mcprl's forks, and what TRL logs is what mcprl computes."""

from __future__ import annotations

import json
import pathlib
import runpy
from typing import Any

import pytest
from conftest import REPO, run_mcprl
from env_server import TASKS, env_serve, stats

import mcprl_env


def test_trl_prompt_is_the_training_prompt(mcprl: pathlib.Path) -> None:
    """examples/trl/base was trained (mcprl sft on examples/trl/sft_tasks.jsonl) on exactly the prompt TRL shows it:
    the ids mcprl renders for a training task equal the ids transformers renders, as GRPOTrainer does, for the
    question alone with the environment's tools."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(REPO / "examples" / "trl" / "base")
    system = mcprl_env.trl_system_prompt(tokenizer)
    sft_tasks = [json.loads(line) for line in (REPO / "examples" / "trl" / "sft_tasks.jsonl").read_text().splitlines()]
    assert [t["id"] for t in sft_tasks] == [json.loads(line)["id"] for line in TASKS.read_text().splitlines()]
    assert all(t["system_prompt"] == system for t in sft_tasks), "examples/trl/sft_tasks.jsonl is stale: scripts/make-trl-base.sh"
    assert '"name": "query_database"' in system and '"name": "run_linter"' in system
    chats = [
        {"messages": [{"role": "system", "content": t["system_prompt"]}, {"role": "user", "content": t["task"]}], "add_generation_prompt": True}
        for t in sft_tasks
    ]
    tokenize = "--tokenizer", str(REPO / "examples" / "trl" / "base")
    rendered = [json.loads(line) for line in run_mcprl(mcprl, "tokenize", *tokenize, stdin="".join(json.dumps(c) + "\n" for c in chats)).splitlines()]
    tools = mcprl_env.environment_tools()
    for t, got in zip(sft_tasks, rendered, strict=True):
        trl = tokenizer.apply_chat_template([{"role": "user", "content": t["task"]}], tools=tools, add_generation_prompt=True, tokenize=False)
        assert got["text"] == trl
        assert got["ids"] == tokenizer(trl, add_special_tokens=False)["input_ids"]


def test_users_script_trains_two_steps(mcprl: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded: list[tuple[list[list[int]], list[float]]] = []
    real_reward = mcprl_env.compute_mcp_reward

    def compute_mcp_reward(completions: list[Any], completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        rewards = real_reward(completions, **kwargs)
        recorded.append((completion_ids, rewards))
        return rewards

    calls = {"n": 0}
    real_call = mcprl_env.Environment._call

    def counted_call(self: mcprl_env.Environment, name: str, arguments: dict[str, Any]) -> str:
        calls["n"] += 1
        return real_call(self, name, arguments)

    monkeypatch.setattr(mcprl_env, "compute_mcp_reward", compute_mcp_reward)
    monkeypatch.setattr(mcprl_env.Environment, "_call", counted_call)
    monkeypatch.setenv("MCPRL_MAX_STEPS", "2")
    monkeypatch.setenv("MCPRL_MAX_COMPLETION_LENGTH", "128")
    monkeypatch.setenv("MCPRL_LOGGING_STEPS", "1")
    monkeypatch.setenv("MCPRL_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")

    with env_serve(mcprl) as url:
        monkeypatch.setenv("MCPRL_ENV_URL", url)
        before = stats(url)
        script = runpy.run_path(str(REPO / "examples" / "trl" / "train_mcp_grpo.py"))
        after = stats(url)

    trainer, tokenizer = script["trainer"], script["tokenizer"]
    assert trainer.state.global_step == 2
    logs = [h for h in trainer.state.log_history if "rewards/compute_mcp_reward/mean" in h]
    assert len(logs) == 2 and len(recorded) == 2

    # Every rollout ran in its own fork; every tool call TRL made ran in one (the server counted them).
    rollouts = sum(len(ids) for ids, _ in recorded)
    assert rollouts == 32  # 2 steps x per_device_train_batch_size 4 x gradient_accumulation_steps 4
    assert after["forks_created"] - before["forks_created"] >= rollouts
    assert after["episodes_scored"] - before["episodes_scored"] == rollouts
    assert calls["n"] > 0, "the policy made no tool call: nothing ran in a fork"
    assert after["tool_calls"] - before["tool_calls"] == calls["n"]
    assert after["open_forks"] <= 16  # only the last batch's episodes are still open (TRL reuses its instances)

    # The rewards TRL logged are mcprl's scoring of the same completions: the ids TRL sampled, decoded, scored
    # by `mcprl score --reward compute_mcp_reward` (the completion's first <tool_call> is the model's own text).
    task_id = json.loads(TASKS.read_text().splitlines()[0])["id"]
    for (ids, rewards), log in zip(recorded, logs, strict=True):
        comp = tmp_path / "completions.jsonl"
        with comp.open("w") as f:
            for seq in ids:
                text = tokenizer.decode(seq, skip_special_tokens=False)
                f.write(json.dumps({"task_id": task_id, "completion": text}) + "\n")
        out = run_mcprl(mcprl, "score", "--reward", "compute_mcp_reward", "--completions", str(comp))
        scored = [json.loads(line)["reward"] for line in out.splitlines()]
        assert rewards == scored
        # TRL averages in float32: n additions and a division, each rounding by at most u = 2^-24 of the largest.
        bound = (len(scored) + 1) * 2.0 ** -24 * max(1.0, max(abs(r) for r in scored))
        assert log["rewards/compute_mcp_reward/mean"] == pytest.approx(sum(scored) / len(scored), abs=bound)
        assert "rewards/Environment/mean" in log  # the server's assertion reward, through get_reward


def test_branching_forks_at_setbacks(mcprl: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/trl/branching.py: TRL's GRPOTrainer with a rollout_func that forks an episode at a setback and
    samples continuations in the forks. Two steps with examples/trl/base: branches ran, each in its own fork of a
    fork of an episode, and the server scored every episode, roots and branches."""
    monkeypatch.setenv("MCPRL_MAX_STEPS", "2")
    monkeypatch.setenv("MCPRL_MAX_COMPLETION_LENGTH", "96")
    monkeypatch.setenv("MCPRL_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    with env_serve(mcprl) as url:
        monkeypatch.setenv("MCPRL_ENV_URL", url)
        before = stats(url)
        script = runpy.run_path(str(REPO / "examples" / "trl" / "branching.py"))
        after = stats(url)
    trainer, counts = script["trainer"], script["stats"]
    diff = {k: after[k] - before[k] for k in ("episode_forks", "episodes_scored", "forks_created")}
    print("branching:", counts, diff)  # shown when an assertion below fails
    assert trainer.state.global_step == 2
    assert counts["setbacks"] > 0 and counts["branches"] > 0, counts
    # A fork of an episode at every setback, and one more for each branch (forked from that fork).
    assert after["episode_forks"] - before["episode_forks"] == counts["setbacks"] + counts["branches"]
    # Every episode ran in a fork of its own and was scored by the server: the roots, the branches, and (unscored)
    # the setbacks' snapshots.
    episodes = counts["roots"] + counts["branches"]
    assert after["episodes_scored"] - before["episodes_scored"] == episodes
    assert after["forks_created"] - before["forks_created"] >= episodes + counts["setbacks"]
    assert after["open_episode_forks"] <= after["episode_forks"]
    logs = [h for h in trainer.state.log_history if "rewards/server_reward/mean" in h]
    assert len(logs) == 2
