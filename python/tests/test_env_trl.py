"""End to end: the user's TRL script (examples/trl/train_mcp_grpo.py) trains with TRL's own GRPOTrainer against
`mcprl env serve`, and what TRL logs is what mcprl computes."""

from __future__ import annotations

import json
import os
import pathlib
import runpy
from typing import Any

import pytest
from conftest import REPO, run_mcprl
from env_server import TASKS, env_serve, stats

import mcprl_env


@pytest.mark.skipif(
    os.environ.get("MCPRL_LONG_TESTS") != "1",
    reason="long (TRL generation on CPU): MCPRL_LONG_TESTS=1; not yet seen to finish on the shared 2-core machine",
)
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
    # by `mcprl score --reward seed` (the completion's first <tool_call> is the model's own text).
    task_id = json.loads(TASKS.read_text().splitlines()[0])["id"]
    for (ids, rewards), log in zip(recorded, logs, strict=True):
        comp = tmp_path / "completions.jsonl"
        with comp.open("w") as f:
            for seq in ids:
                text = tokenizer.decode(seq, skip_special_tokens=False)
                f.write(json.dumps({"task_id": task_id, "completion": text}) + "\n")
        out = run_mcprl(mcprl, "score", "--reward", "seed", "--completions", str(comp))
        scored = [json.loads(line)["reward"] for line in out.splitlines()]
        assert rewards == scored
        assert log["rewards/compute_mcp_reward/mean"] == pytest.approx(sum(scored) / len(scored), abs=1e-6)
        assert "rewards/Environment/mean" in log  # the server's assertion reward, through get_reward
