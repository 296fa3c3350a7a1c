"""Reward functions for TRL's ``reward_funcs``, scored by the server (mcprl's Go rewards, not re-implemented here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .client import Session
from .env import _TASK_FIELDS, Environment

Completion = str | list[dict[str, Any]]


def _score(name: str, completions: list[Completion], environments: list[Any] | None, kwargs: dict[str, Any]) -> list[float]:
    out: list[float] = []
    for i, completion in enumerate(completions):
        env = environments[i] if environments is not None and i < len(environments) else None
        if isinstance(env, Environment):
            # The rollout's own episode: its calls ran in its fork; score it with the completion's text.
            rewards = env._rewards(completion)
        else:
            # No live episode: a fresh one for this completion, its calls replayed in a fork.
            fields = {k: kwargs[k][i] for k in _TASK_FIELDS if isinstance(kwargs.get(k), list) and kwargs[k][i] is not None}
            if not fields:
                fields = {"task": "(scoring a completion)"}
            with Session() as s:
                s.reset(**fields)
                rewards = s.finish(completion, replay=True)["observation"]["rewards"]
        if name not in rewards:
            raise KeyError(f"the server does not compute reward {name!r} (it computes {sorted(rewards)}): start it with --rewards {name}")
        out.append(float(rewards[name]))
    return out


def compute_mcp_reward(completions: list[Completion], environments: list[Any] | None = None, **kwargs: Any) -> list[float]:
    """The user's ``compute_mcp_reward``, as mcprl computes it (Python's exact semantics), for ``reward_funcs``.

    Each completion is scored on its text: a string as sampled, or TRL's messages with their tool calls written as
    Qwen2.5's chat template writes them. With TRL's ``environments`` (``environment_factory=Environment``) this
    also ends each rollout's episode, scored on the same text.
    """
    return _score("compute_mcp_reward", completions, environments, kwargs)


def server_reward(name: str) -> Callable[..., list[float]]:
    """A reward function returning the server's reward ``name`` (one of its ``--rewards``) for each completion."""

    def reward(completions: list[Completion], environments: list[Any] | None = None, **kwargs: Any) -> list[float]:
        return _score(name, completions, environments, kwargs)

    reward.__name__ = f"mcprl_{name}"
    reward.__doc__ = f"The server's {name!r} reward of each rollout's episode."
    return reward


#: The share of the task's ground_truth_assertions that hold live in the rollout's fork.
assertions_reward = server_reward("assertions")
