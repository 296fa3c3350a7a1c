"""mcprl sft's loss against TRL's SFTTrainer with assistant_only_loss=True on the same conversations.

mcprl replays the golden trajectories of three of the user's tasks against live SQLite sandboxes, trains one step
on all three in one batch (`mcprl sft`), and logs the step's loss (computed before the update) and the replayed
conversations (completions.jsonl: each assistant turn's text and each tool call's result). TRL gets those
conversations as a conversational dataset (system prompt, user task, assistant turns with their tool calls as
text, tool results) and the same model directory, and its own code does the rest: SFTTrainer swaps in its
training chat template with {% generation %} markers (trl/chat_templates/qwen2_5_training.jinja, as it does for
any template without them), tokenizes with `return_assistant_tokens_mask`, collates, and `compute_loss` runs
transformers' forward and causal-LM loss.

The two masks differ by design, and only on template tokens: TRL's generation block for an assistant message is
"\\n" + content + "<|im_end|>\\n", mcprl trains the tokens the policy samples, which are the content, ending with
"</tool_call>" for a tool-call turn (sampling stops there; the template adds "<|im_end|>") and with "<|im_end|>"
for the final answer. So TRL's own assistant-only loss also trains the newline after "<|im_start|>assistant",
the "<|im_end|>" after each tool call and the newline after every "<|im_end|>". The test checks that difference
token by token, then runs TRL's compute_loss with labels restricted to mcprl's positions: it must equal mcprl's
logged loss. TRL's own assistant-only loss on the same batch is recorded beside it.
"""

from __future__ import annotations

import json
import pathlib
import tempfile
from typing import Any

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

from conftest import REPO, rounding_bound, run_mcprl

TASKS = ("customers-orphan-orders-007", "customers-normalize-status-004", "customers-inactive-orders-006")

CONFIG = """learning_rate: 1.0e-5
max_steps: 1
per_device_train_batch_size: {batch}
lr_scheduler_type: constant
logging_steps: 1
save_steps: 100
seed: 1
max_prompt_length: 2048
max_completion_length: 2048
"""


def conversations(tasks: dict[str, dict[str, Any]], completions: pathlib.Path) -> list[list[dict[str, str]]]:
    """The replayed trajectories of completions.jsonl as chat messages, the way mcprl's rollout renders them:
    the task's system prompt, the task, then per turn the assistant's text and one tool message per call."""
    out = []
    for line in completions.read_text().splitlines():
        rec = json.loads(line)
        msgs = [{"role": "system", "content": tasks[rec["task_id"]]["system_prompt"]},
                {"role": "user", "content": rec["prompt"]}]
        for turn in rec["turns"]:
            msgs.append({"role": "assistant", "content": turn["text"]})
            for call in turn.get("calls") or []:
                msgs.append({"role": "tool", "content": call["result"], "name": call["name"]})
        out.append(msgs)
    return out


def mcprl_positions(ids: list[int], assistant: list[int], newline: int, im_end: int, tool_end: int) -> list[int]:
    """mcprl's trained positions inside TRL's assistant mask: each run of the mask is "\\n" + content +
    "<|im_end|>" + "\\n"; mcprl trains the content, plus "<|im_end|>" when the content does not end a tool call.
    Asserts the template tokens are where the template puts them."""
    keep = [0] * len(ids)
    i = 0
    while i < len(ids):
        if not assistant[i]:
            i += 1
            continue
        j = i
        while j < len(ids) and assistant[j]:
            j += 1
        run = ids[i:j]
        assert run[0] == newline and run[-1] == newline and run[-2] == im_end, f"assistant run {run}"
        end = j - 1 if run[-3] != tool_end else j - 2  # keep <|im_end|> only after a final answer
        for k in range(i + 1, end):
            keep[k] = 1
        i = j
    return keep


def test_sft_loss_matches_trl(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    all_tasks = [json.loads(line) for line in (REPO / "examples/customers/tasks.jsonl").read_text().splitlines()]
    tasks = {t["id"]: t for t in all_tasks if t["id"] in TASKS}
    assert len(tasks) == len(TASKS)
    # One system prompt for all (the file's first task's): the conversation then starts with it, and no tool
    # schemas from the sandbox enter the prompt.
    for t in tasks.values():
        t["system_prompt"] = all_tasks[0]["system_prompt"]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks.values()))
    (tmp_path / "sft.yaml").write_text(CONFIG.format(batch=len(tasks)))
    model_dir = tmp_path / "tiny"
    run_mcprl(mcprl, "model", "init", "--tokenizer", str(REPO / "tokenizer/small/qwen2.5-2048"), "--out",
              str(model_dir), "--seed", "3")
    out = tmp_path / "sft"
    run_mcprl(mcprl, "sft", "--config", str(tmp_path / "sft.yaml"), "--model", str(model_dir), "--tasks",
              str(tmp_path / "tasks.jsonl"), "--fixtures", str(REPO / "examples/fixtures"), "--output-dir", str(out))
    ours = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["loss"]

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    convs = conversations(tasks, out / "completions.jsonl")
    args = SFTConfig(output_dir=tempfile.mkdtemp(), assistant_only_loss=True, per_device_train_batch_size=len(convs),
                     max_length=None, report_to=[], use_cpu=True, save_strategy="no")
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list([{"messages": m} for m in convs]),
                         processing_class=tok)
    assert trainer.chat_template is not None, "TRL did not swap in its training template"
    batch = next(iter(trainer.get_train_dataloader()))
    model.eval()  # no dropout; the model has none, this only makes it explicit
    with torch.no_grad():
        trl_assistant_only = trainer.compute_loss(model, dict(batch)).item()

        newline, im_end, tool_end = (tok.convert_tokens_to_ids(t) for t in ("Ċ", "<|im_end|>", "</tool_call>"))
        labels = torch.full_like(batch["input_ids"], -100)
        trained = 0
        for b in range(batch["input_ids"].shape[0]):
            ids = batch["input_ids"][b].tolist()
            assistant = (batch["labels"][b] != -100).long().tolist()
            keep = mcprl_positions(ids, assistant, newline, im_end, tool_end)
            trained += sum(keep)
            for k, on in enumerate(keep):
                if on:
                    labels[b, k] = ids[k]
        trl_on_mcprl_tokens = trainer.compute_loss(model, {**batch, "labels": labels}).item()
        # The float64 answer on the same weights and tokens (transformers' loss casts logits to float32, so it is
        # computed here): TRL's float32 distance from it is the rounding the bound allows for.
        model.double()
        logits64 = model(**{k: batch[k] for k in ("input_ids", "attention_mask") if k in batch}).logits
        model.float()
        target, trained_mask = labels[:, 1:], labels[:, 1:] != -100
        token_lp = torch.log_softmax(logits64[:, :-1], -1).gather(-1, target.clamp(min=0)[..., None])[..., 0]
        trl64 = -token_lp[trained_mask].mean().item()

    print(f"mcprl sft loss {ours:.9f}; TRL compute_loss on mcprl's {trained} trained tokens {trl_on_mcprl_tokens:.9f} "
          f"(|diff| {abs(ours - trl_on_mcprl_tokens):.2e}); TRL's assistant-only loss {trl_assistant_only:.9f}")
    bound = rounding_bound(abs(trl_on_mcprl_tokens - trl64), abs(trl64))
    print(f"from float64 {trl64:.9f}: mcprl {abs(ours - trl64):.2e}, TRL {abs(trl_on_mcprl_tokens - trl64):.2e} "
          f"(bound {bound:.2e})")
    assert abs(ours - trl64) <= bound
