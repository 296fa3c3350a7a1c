"""TRL's and transformers' halves of scripts/bench-vs-trl.sh and scripts/bench-smollm2-step.sh (TRL=1).

Usage: bench_trl.py MODEL_DIR THREADS [bf16] [--prompt N] [--completion N] [--lora-r R] [--lora-targets a,b]
                    [--gradient-checkpointing] [--steps N] [--no-sampling]
       -> one JSON line {"step_seconds": [...], "sample_seconds": [...], "peak_rss_gib": ..., ...}

The step is TRL's GRPOTrainer._compute_loss (forward over the completion, dapo loss) on a batch of 8 sequences
(128 prompt + 128 completion tokens unless --prompt/--completion say otherwise), backward, gradient clipping and
the trainer's AdamW step; with --lora-r, TRL's own PEFT path (GRPOTrainer(peft_config=LoraConfig(r, lora_alpha 2r,
lora_dropout 0, the target modules))) trains only the adapter, as BenchmarkGRPOStep does with $MCPRL_BENCH_LORA_R.
Sampling is transformers' generate on 8 prompts of 32 tokens, 128 new tokens, greedy, with the KV cache. The same
shapes as mcprl's BenchmarkGRPOStep and `mcprl model generate` in the scripts. The first step is a warm-up.

The step runs in float32, as mcprl's does: GRPOConfig's bf16 defaults to True, which makes accelerate run the
forward pass under CPU autocast to bfloat16, whose matmuls are fast only on CPUs with bfloat16 instructions (an
Intel Xeon with AVX512-BF16 ran that step in 0.47 s; an AMD EPYC with AVX2 alone took 11 s, its bfloat16 matmuls at
2-19 GFLOP/s against 120-160 in float32). A third argument `bf16` measures TRL's default instead. GRPOConfig's
gradient_checkpointing defaults to True; it is set here as --gradient-checkpointing says (off unless given), as
mcprl's benchmark sets its own, and the JSON reports whether the model ran with it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

BATCH, SAMPLE_PROMPT, NEW = 8, 32, 128


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model_dir")
    p.add_argument("threads", type=int)
    p.add_argument("precision", nargs="?", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--completion", type=int, default=128)
    p.add_argument("--lora-r", type=int, default=0)
    p.add_argument("--lora-targets", default="q_proj,v_proj")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--steps", type=int, default=3, help="timed steps after the warm-up")
    p.add_argument("--no-sampling", action="store_true")
    return p.parse_args()


def main() -> None:
    a = parse()
    torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(a.model_dir)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32)
    vocab = model.config.vocab_size
    peft_config = None
    if a.lora_r > 0:
        from peft import LoraConfig

        peft_config = LoraConfig(r=a.lora_r, lora_alpha=2 * a.lora_r, lora_dropout=0.0,
                                 target_modules=a.lora_targets.split(","), task_type="CAUSAL_LM")
    args = GRPOConfig(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=BATCH, num_generations=BATCH,
                      max_completion_length=a.completion, learning_rate=1e-5, loss_type="dapo", report_to=[],
                      use_cpu=True, save_strategy="no", bf16=a.precision == "bf16",
                      gradient_checkpointing=a.gradient_checkpointing)
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)], args=args,
                          train_dataset=Dataset.from_list([{"prompt": "hi"}] * BATCH), processing_class=tok,
                          peft_config=peft_config)
    model = trainer.model
    if a.gradient_checkpointing:  # Trainer.train() turns it on; this benchmark calls the loss directly
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs)
        if peft_config is not None:
            model.enable_input_require_grads()
    trainer.create_optimizer()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() per window; one step here
    model.train()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    length = a.prompt + a.completion
    ids = torch.tensor([[(i * 131 + j * 17) % vocab for j in range(length)] for i in range(BATCH)])
    inputs = {
        "prompt_ids": ids[:, :a.prompt], "prompt_mask": torch.ones(BATCH, a.prompt, dtype=torch.long),
        "completion_ids": ids[:, a.prompt:], "completion_mask": torch.ones(BATCH, a.completion, dtype=torch.long),
        "advantages": torch.tensor([1.0 - 2 * (i % 2) for i in range(BATCH)]),
        "num_items_in_batch": torch.tensor(float(BATCH * a.completion)),
    }
    step_seconds = []
    for _ in range(1 + a.steps):  # the first is a warm-up
        t0 = time.perf_counter()
        loss = trainer._compute_loss(model, inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad()
        step_seconds.append(time.perf_counter() - t0)

    sample_seconds = []
    if not a.no_sampling:
        model.eval()
        prompts = torch.tensor([[(i * 31 + j * 7) % vocab for j in range(SAMPLE_PROMPT)] for i in range(BATCH)])
        with torch.no_grad():
            for _ in range(3):
                t0 = time.perf_counter()
                out = model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=False,
                                     max_new_tokens=NEW, min_new_tokens=NEW, use_cache=True,
                                     pad_token_id=tok.pad_token_id)
                sample_seconds.append(time.perf_counter() - t0)
                assert out.shape[1] == SAMPLE_PROMPT + NEW
    print(json.dumps({"step_seconds": step_seconds, "sample_seconds": sample_seconds,
                      "torch_threads": torch.get_num_threads(), "mixed_precision": trainer.accelerator.mixed_precision,
                      "trainable_parameters": trainable,
                      "gradient_checkpointing": bool(getattr(model, "is_gradient_checkpointing", False)),
                      "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))


if __name__ == "__main__":
    main()
