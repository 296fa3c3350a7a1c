"""Writes examples/trl/sft_tasks.jsonl: the customers tasks with, as system prompt, the system message TRL's
GRPOTrainer renders for mcprl_env.Environment's tools (mcprl_env.trl_system_prompt), so that `mcprl sft` trains
examples/trl/base on exactly the prompt TRL shows it (scripts/make-trl-base.sh runs this)."""

import json
import pathlib
import sys

repo = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(repo / "python"))

from transformers import AutoTokenizer  # noqa: E402

import mcprl_env  # noqa: E402

tokenizer = AutoTokenizer.from_pretrained(repo / "examples" / "customers" / "base")
system = mcprl_env.trl_system_prompt(tokenizer)
out = []
for line in (repo / "examples" / "customers" / "tasks.jsonl").read_text().splitlines():
    if line.strip():
        task = json.loads(line)
        task["system_prompt"] = system
        out.append(json.dumps(task, ensure_ascii=False))
(repo / "examples" / "trl" / "sft_tasks.jsonl").write_text("\n".join(out) + "\n")
