"""Chat template and tokenizer parity: transformers' AutoTokenizer.apply_chat_template against mcprl's.

For multi-turn conversations with tools, tool calls and tool results, both the rendered text (byte for byte)
and the token ids must be identical, for the full Qwen2.5 tokenizer and the reduced 2,048-id one.
"""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest
from transformers import AutoTokenizer

from conftest import REPO, run_mcprl

TOKENIZERS = {
    "qwen2.5": REPO / "tokenizer/testdata/qwen2.5",
    "qwen2.5-2048": REPO / "tokenizer/small/qwen2.5-2048",
}

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "query_database",
            "description": "Run one read-only SQL query against the task's database.",
            "parameters": {
                "type": "object",
                "properties": {"sql": {"type": "string", "description": "the SQL statement"}},
                "required": ["sql"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_linter",
            "description": "Lint a workspace file (SQL, JSON, YAML).",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
]


def _hand_written() -> list[list[dict[str, Any]]]:
    """Conversations exercising parallel calls, consecutive tool results, floats, nesting and Unicode."""
    return [
        [
            {"role": "user", "content": "How many inactive customers are there?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM customers"}}],
            },
            {"role": "tool", "name": "query_database", "content": "COUNT(*)\n--------\n7\n(1 row)"},
        ],
        [
            {"role": "system", "content": "You are careful. Réponds en français si demandé — 日本語 OK."},
            {"role": "user", "content": "Check both files, then count rows.\n\n  Indented line\ttab"},
            {
                "role": "assistant",
                "content": "I will lint both files at once.",
                "tool_calls": [
                    {"name": "run_linter", "arguments": {"path": "schema.sql"}},
                    {"name": "run_linter", "arguments": {"path": "config/app.yaml", "strict": True, "level": 1.0}},
                ],
            },
            {"role": "tool", "name": "run_linter", "content": "ok"},
            {"role": "tool", "name": "run_linter", "content": "line 3: mapping values are not allowed here"},
            {
                "role": "assistant",
                "content": "The YAML file has an error. Now the count.",
                "tool_calls": [
                    {
                        "name": "query_database",
                        "arguments": {"sql": "SELECT status, COUNT(*) FROM t GROUP BY 1", "limit": 10,
                                      "z": {"b": [1, 2.5, -0.0, 1e-07], "a": None}},
                    }
                ],
            },
            {"role": "tool", "name": "query_database", "content": "status | n\ninactive | 7 😀"},
            {"role": "assistant", "content": "Seven inactive customers; schema.sql is clean."},
            {"role": "user", "content": "Thanks. And the active ones?"},
        ],
    ]


def _from_tasks() -> list[list[dict[str, Any]]]:
    """The golden trajectories of the example tasks: system prompt, task, assistant turns and tool results."""
    convs = []
    for line in (REPO / "examples/customers/tasks.jsonl").read_text().splitlines():
        task = json.loads(line)
        convs.append(
            ([{"role": "system", "content": task["system_prompt"]}] if task.get("system_prompt") else [])
            + [{"role": "user", "content": task["task"]}]
            + task["golden"]
        )
    return convs


def _hf_messages(conv: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """mcprl's message form (tool_calls as {name, arguments}) in transformers' form."""
    out = []
    for m in copy.deepcopy(conv):
        if "tool_calls" in m:
            m["tool_calls"] = [{"type": "function", "function": c} for c in m["tool_calls"]]
        out.append(m)
    return out


def _cases() -> list[tuple[list[dict[str, Any]], bool]]:
    cases = []
    for conv in _hand_written() + _from_tasks():
        # Every prefix that ends on a user or tool turn, as a rollout renders it before sampling, and the whole.
        for n in range(1, len(conv) + 1):
            if conv[n - 1]["role"] in ("user", "tool"):
                cases.append((conv[:n], True))
        cases.append((conv, False))
    return cases


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_apply_chat_template_parity(mcprl: pathlib.Path, name: str) -> None:
    directory = TOKENIZERS[name]
    hf = AutoTokenizer.from_pretrained(str(directory))
    cases = _cases()
    assert len(cases) > 20
    lines = [json.dumps({"messages": conv, "tools": TOOLS, "add_generation_prompt": gen}) for conv, gen in cases]
    got = [json.loads(l) for l in run_mcprl(mcprl, "tokenize", "--tokenizer", str(directory),
                                            stdin="\n".join(lines) + "\n").splitlines()]
    assert len(got) == len(cases)
    for i, ((conv, gen), ours) in enumerate(zip(cases, got)):
        text = hf.apply_chat_template(_hf_messages(conv), tools=TOOLS, add_generation_prompt=gen, tokenize=False)
        assert ours["text"] == text, f"case {i}: rendered text differs"
        ids = hf(text, add_special_tokens=False)["input_ids"]
        assert ours["ids"] == ids, f"case {i}: ids differ"
        direct = hf.apply_chat_template(_hf_messages(conv), tools=TOOLS, add_generation_prompt=gen, tokenize=True,
                                        return_dict=False)
        assert ours["ids"] == list(direct), f"case {i}: ids differ from apply_chat_template(tokenize=True)"
