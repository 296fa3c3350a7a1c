"""The prompt TRL's GRPOTrainer shows a policy, so that mcprl can train the policy on that same prompt first."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .env import Environment

_PROBE = "\x00mcprl-probe\x00"


def environment_tools(environment: type[Environment] = Environment) -> list[Callable[..., Any]]:
    """The environment's tools as TRL's GRPOTrainer collects them for ``environment_factory``.

    TRL lists the class's public functions (``inspect.getmembers``, sorted by name) other than ``reset`` and
    ``get_reward``; ``apply_chat_template`` turns each into a JSON schema with transformers' ``get_json_schema``.
    """
    return [
        fn
        for name, fn in inspect.getmembers(environment, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def trl_system_prompt(tokenizer: Any, environment: type[Environment] = Environment) -> str:
    """The system message TRL renders for a prompt that has none, with the environment's tools.

    GRPOTrainer renders each dataset prompt with ``tools=`` the environment's methods; Qwen2.5's chat template
    writes them into the system message (its default system text, then the tools' JSON schemas). A task whose
    ``system_prompt`` is this text renders, in mcprl (``mcprl sft``, ``mcprl train``), to exactly the prompt TRL
    shows for the task's question alone: warm a policy up with mcprl on it, then train it with TRL.

    Raises ValueError when the tokenizer's template does not write the tools as one leading system message.
    """
    user = [{"role": "user", "content": _PROBE}]
    with_tools = tokenizer.apply_chat_template(user, tools=environment_tools(environment), tokenize=False, add_generation_prompt=True)
    head = with_tools.split(_PROBE, 1)[0]
    for system in _system_candidates(head):
        as_system = tokenizer.apply_chat_template(
            [{"role": "system", "content": system}, *user], tokenize=False, add_generation_prompt=True
        )
        if as_system == with_tools:
            return system
    raise ValueError("the chat template does not render the tools as a leading system message")


def _system_candidates(head: str) -> list[str]:
    # The system message's text between ChatML's system header and end-of-turn marker (Qwen2.5, SmolLM2);
    # trl_system_prompt checks it by rendering it back.
    out = []
    start, end = "<|im_start|>system\n", "<|im_end|>"
    if start in head and end in head:
        out.append(head.split(start, 1)[1].split(end, 1)[0])
    return out
