# branching.py: TRL's GRPOTrainer with tree rollouts on mcprl's live sandboxes: at a setback, fork the episode.
#
# A custom rollout_func (TRL's hook for rollouts it does not run itself) samples each prompt's group in two halves.
# The first half are roots: multi-turn trajectories whose tool calls run in their own episode on `mcprl env serve`
# (mcprl_env.Environment, one fork each). When a root's call meets a setback (the tool reported an error, or a
# query came back with no rows), the episode is forked there (Environment.fork: the database as the calls left it,
# the calls so far) and the second half of the group are continuations sampled from that very state, each in a
# fork of its own, from the root's tokens up to and including the setback's observation. Every episode, root or
# branch, is scored by the server as a whole (its finish reward, reward "server_reward" here), so the group compares
# a recovery with the roots that never got one. A root without a setback leaves its branch slot to another root.
# The observation tokens are masked out of the loss (env_mask), as TRL masks tool output.
#
# Run (two terminals, from the repository root):
#   mcprl env serve --fixtures examples/fixtures --tasks examples/customers/tasks.jsonl --listen 127.0.0.1:8000
#   MCPRL_ENV_URL=http://127.0.0.1:8000 PYTHONPATH=python .venv/bin/python examples/trl/branching.py
# MCPRL_MAX_STEPS and MCPRL_MAX_COMPLETION_LENGTH shorten it (the CI test, python/tests/test_env_trl.py: 2 steps).
from __future__ import annotations

import json
import os
import pathlib
import re
from typing import Any

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from mcprl_env import Environment, environment_tools

repo = pathlib.Path(__file__).resolve().parents[2]
model_id = os.environ.get("MCPRL_MODEL", str(repo / "examples" / "trl" / "base"))
tokenizer = AutoTokenizer.from_pretrained(model_id)
model = AutoModelForCausalLM.from_pretrained(model_id)
max_completion = int(os.environ.get("MCPRL_MAX_COMPLETION_LENGTH", 256))
max_turns = 3

tasks_file = pathlib.Path(os.environ.get("MCPRL_TASKS", repo / "examples" / "customers" / "tasks.jsonl"))
rows, task_of = [], {}
for line in tasks_file.read_text().splitlines():
    if line.strip():
        t = json.loads(line)
        rows.append({"prompt": [{"role": "user", "content": t["task"]}], "task_id": t["id"]})
        task_of[t["task"]] = t["id"]
dataset = Dataset.from_list(rows)

CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
END = tokenizer.convert_tokens_to_ids("<|im_end|>")
TOOL_END = tokenizer.convert_tokens_to_ids("</tool_call>")
stats: dict[str, int] = {"roots": 0, "setbacks": 0, "branches": 0}  # read by the CI test


@torch.no_grad()
def sample(ids: list[int], budget: int) -> tuple[list[int], list[float]]:
    """Samples one assistant turn after ids (up to <|im_end|> or </tool_call>); its ids and their log-probs."""
    out = model.generate(
        torch.tensor([ids]), max_new_tokens=max(1, budget), do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
        eos_token_id=[END, TOOL_END], pad_token_id=END, output_scores=True, return_dict_in_generate=True, use_cache=True,
    )
    new = out.sequences[0, len(ids):].tolist()
    logps = [torch.log_softmax(s[0].float(), -1)[t].item() for s, t in zip(out.scores, new)]
    return new, logps


def observation(text: str) -> list[int]:
    """The tokens between a tool call and the next assistant turn, as Qwen2.5's template writes a tool response."""
    rendered = "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + text + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    return tokenizer(rendered, add_special_tokens=False)["input_ids"]


class Episode:
    """One trajectory in flight: its environment, completion ids, env_mask and log-probs."""

    def __init__(self, env: Environment, prompt_ids: list[int]) -> None:
        self.env, self.prompt_ids = env, prompt_ids
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logps: list[float] = []
        self.setback: tuple[Environment, int] | None = None  # a fork at the first setback, and the prefix's length

    def run(self, turns: int) -> None:
        """Samples turns, running each turn's tool call in the episode; forks at the first setback."""
        for _ in range(turns):
            new, logps = sample(self.prompt_ids + self.ids, max_completion - len(self.ids))
            self.ids += new
            self.mask += [1] * len(new)
            self.logps += logps
            text = tokenizer.decode(new)
            m = CALL.search(text)
            if not new or new[-1] != TOOL_END or m is None or len(self.ids) >= max_completion:
                return
            try:
                call = json.loads(m.group(1))
                obs = self.env._session.call_tool(str(call.get("name")), dict(call.get("arguments") or {}))
                result = obs.get("result") or {}
                data, failed = str(result.get("data", "")), bool(result.get("isError")) or bool(obs.get("error"))
            except (ValueError, AttributeError, TypeError) as err:
                data, failed = f"error: {err}", True
            empty = "(0 rows)" in data
            tail = observation(data)
            self.ids += tail
            self.mask += [0] * len(tail)
            self.logps += [0.0] * len(tail)
            if (failed or empty) and self.setback is None:
                stats["setbacks"] += 1
                self.setback = (self.env.fork(), len(self.ids))

    def reward(self) -> float:
        """The server's score of the whole episode (its calls, this completion's text)."""
        r = self.env._finish(tokenizer.decode(self.ids, skip_special_tokens=True))
        return float(r.get("reward") or 0.0)


def rollout_func(prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
    n = trainer.num_generations
    out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "server_reward": [], "branch": []}
    for g in range(0, len(prompts), n):
        prompt = prompts[g]
        task_id = task_of[prompt[-1]["content"]]
        text = tokenizer.apply_chat_template(prompt, tools=environment_tools(), add_generation_prompt=True, tokenize=False)
        prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        episodes: list[tuple[Episode, bool]] = []
        roots = []
        for _ in range(n - n // 2):
            env = Environment()
            env.reset(task_id=task_id)
            ep = Episode(env, prompt_ids)
            ep.run(max_turns)
            stats["roots"] += 1
            roots.append(ep)
            episodes.append((ep, False))
        setbacks = [r for r in roots if r.setback is not None]
        for k in range(n // 2):
            if setbacks:
                root = setbacks[k % len(setbacks)]
                assert root.setback is not None
                fork, at = root.setback
                child = fork.fork()  # the setback's state, in a fork of its own for each branch
                ep = Episode(child, prompt_ids)
                ep.ids, ep.mask, ep.logps = root.ids[:at], root.mask[:at], root.logps[:at]
                ep.run(max_turns)
                stats["branches"] += 1
                episodes.append((ep, True))
            else:
                env = Environment()
                env.reset(task_id=task_id)
                ep = Episode(env, prompt_ids)
                ep.run(max_turns)
                stats["roots"] += 1
                episodes.append((ep, False))
        for ep, is_branch in episodes:
            out["prompt_ids"].append(ep.prompt_ids)
            out["completion_ids"].append(ep.ids or [END])
            out["logprobs"].append(ep.logps or [0.0])
            out["env_mask"].append(ep.mask or [1])
            out["server_reward"].append(ep.reward())
            out["branch"].append(is_branch)
            ep.env._close()
        for r in roots:
            if r.setback is not None:
                r.setback[0]._close()
    return out


def server_reward(completions: list[Any], server_reward: list[float], **kwargs: Any) -> list[float]:
    """The server's score of each episode, root or branch (its --rewards: assertions by default)."""
    return server_reward


training_args = GRPOConfig(
    output_dir=os.environ.get("MCPRL_OUTPUT_DIR", "./branching-checkpoints"),
    learning_rate=1e-5,
    per_device_train_batch_size=4,
    gradient_accumulation_steps=1,
    num_generations=4,  # a group: 2 roots, then 2 continuations sampled from their setbacks
    gradient_checkpointing=False,  # generation in rollout_func needs the KV cache
    max_completion_length=max_completion,
    logging_steps=1,
    max_steps=int(os.environ.get("MCPRL_MAX_STEPS", 20)),
    use_cpu=not torch.cuda.is_available(),
)
trainer = GRPOTrainer(
    model=model,
    processing_class=tokenizer,
    reward_funcs=server_reward,
    args=training_args,
    train_dataset=dataset,
    rollout_func=rollout_func,
)
trainer.train()
