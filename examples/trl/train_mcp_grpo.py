# train_mcp_grpo.py: the user's script, run by TRL's own GRPOTrainer against mcprl's live sandboxes.
#
# Changes from the user's script, and only these:
#   - the model is the tiny Qwen2 of examples/trl/base (0.63M parameters, written by `mcprl model init` and
#     warmed up by `mcprl sft`, first as examples/customers/base, then on the prompt TRL renders for these tools:
#     scripts/make-trl-base.sh) instead of Qwen2.5-Coder-7B-Instruct;
#   - the dataset is mcprl's task file (examples/customers/tasks.jsonl: the user's task and its rewordings); each
#     row's prompt is the task's question: TRL writes the tools (environment_factory's methods, their schemas from
#     their docstrings) into the system message itself, which the task's own system prompt, the seed's tool
#     catalog in prose, would only repeat;
#   - environment_factory=mcprl_env.Environment: every rollout's tool calls run in its own fork of the customers
#     fixture on `mcprl env serve`, and the server's live assertion reward joins compute_mcp_reward;
#   - compute_mcp_reward is mcprl's (mcprl_env.compute_mcp_reward: the user's function with Python's exact
#     semantics, scored by the server on each completion's text);
#   - max_prompt_length is left out: TRL 1.x's GRPOConfig no longer has it (TRL 1.16 raises TypeError on it);
#   - use_cpu on a machine without a GPU (TRL's default bf16 is refused on CPU unless use_cpu is set).
#
# Run (two terminals, from the repository root):
#   mcprl env serve --fixtures examples/fixtures --tasks examples/customers/tasks.jsonl --listen 127.0.0.1:8000
#   MCPRL_ENV_URL=http://127.0.0.1:8000 PYTHONPATH=python .venv/bin/python examples/trl/train_mcp_grpo.py
# MCPRL_MAX_STEPS, MCPRL_LOGGING_STEPS and MCPRL_MAX_COMPLETION_LENGTH shorten the run (the CI test: 2 steps,
# logged each step, 128 tokens); MCPRL_MODEL, MCPRL_TASKS and MCPRL_OUTPUT_DIR point elsewhere.
import json
import os
import pathlib

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from mcprl_env import Environment, compute_mcp_reward

repo = pathlib.Path(__file__).resolve().parents[2]
model_id = os.environ.get("MCPRL_MODEL", str(repo / "examples" / "trl" / "base"))
tokenizer = AutoTokenizer.from_pretrained(model_id)
model = AutoModelForCausalLM.from_pretrained(model_id, device_map="auto")

# mcprl's task file: the prompt is the task's question; task_id names the task on the server.
tasks_file = pathlib.Path(os.environ.get("MCPRL_TASKS", repo / "examples" / "customers" / "tasks.jsonl"))
rows = []
for line in tasks_file.read_text().splitlines():
    if line.strip():
        t = json.loads(line)
        rows.append({"prompt": [{"role": "user", "content": t["task"]}], "task_id": t["id"]})
dataset = Dataset.from_list(rows)

training_args = GRPOConfig(
    output_dir=os.environ.get("MCPRL_OUTPUT_DIR", "./qwen-mcp-grpo-checkpoints"),
    learning_rate=1e-5,
    num_train_epochs=3,
    per_device_train_batch_size=4,
    gradient_accumulation_steps=4,
    num_generations=8,  # Sample 8 trajectories per prompt
    max_completion_length=int(os.environ.get("MCPRL_MAX_COMPLETION_LENGTH", 1024)),
    logging_steps=int(os.environ.get("MCPRL_LOGGING_STEPS", 10)),
    max_steps=int(os.environ.get("MCPRL_MAX_STEPS", -1)),
    use_cpu=not torch.cuda.is_available(),
)

trainer = GRPOTrainer(
    model=model,
    processing_class=tokenizer,
    reward_funcs=compute_mcp_reward,
    args=training_args,
    train_dataset=dataset,
    environment_factory=Environment,
)
trainer.train()
