"""TRL's and transformers' halves of scripts/bench-vs-trl.sh: one GRPO optimizer step and batched sampling.

Usage: bench_trl.py MODEL_DIR THREADS [bf16]  -> one JSON line {"step_seconds": [...], "sample_seconds": [...]}
The step is TRL's GRPOTrainer._compute_loss (forward over the completion, dapo loss) on a batch of 8 sequences of
256 tokens (128 prompt + 128 completion), backward, and the trainer's AdamW step; sampling is transformers'
generate on 8 prompts of 32 tokens, 128 new tokens, greedy, with the KV cache. The same shapes as mcprl's
BenchmarkGRPOStep and `mcprl model generate` in the script.

The step runs in float32, as mcprl's does: GRPOConfig's bf16 defaults to True, which makes accelerate run the
forward pass under CPU autocast to bfloat16, whose matmuls are fast only on CPUs with bfloat16 instructions (an
Intel Xeon with AVX512-BF16 ran that step in 0.47 s; an AMD EPYC with AVX2 alone took 11 s, its bfloat16 matmuls at
2-19 GFLOP/s against 120-160 in float32). A third argument `bf16` measures TRL's default instead.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

BATCH, PROMPT, COMPLETION, SAMPLE_PROMPT, NEW = 8, 128, 128, 32, 128


def main() -> None:
    model_dir, threads = sys.argv[1], int(sys.argv[2])
    bf16 = len(sys.argv) > 3 and sys.argv[3] == "bf16"
    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    vocab = model.config.vocab_size
    args = GRPOConfig(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=BATCH, num_generations=BATCH,
                      max_completion_length=COMPLETION, learning_rate=1e-5, loss_type="dapo", report_to=[],
                      use_cpu=True, save_strategy="no", bf16=bf16)
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)], args=args,
                          train_dataset=Dataset.from_list([{"prompt": "hi"}] * BATCH), processing_class=tok)
    trainer.create_optimizer()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() per window; one step here
    model.train()
    ids = torch.tensor([[(i * 131 + j * 17) % vocab for j in range(PROMPT + COMPLETION)] for i in range(BATCH)])
    inputs = {
        "prompt_ids": ids[:, :PROMPT], "prompt_mask": torch.ones(BATCH, PROMPT, dtype=torch.long),
        "completion_ids": ids[:, PROMPT:], "completion_mask": torch.ones(BATCH, COMPLETION, dtype=torch.long),
        "advantages": torch.tensor([1.0 - 2 * (i % 2) for i in range(BATCH)]),
        "num_items_in_batch": torch.tensor(float(BATCH * COMPLETION)),
    }
    step_seconds = []
    for _ in range(4):  # the first is a warm-up
        t0 = time.perf_counter()
        loss = trainer._compute_loss(model, inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad()
        step_seconds.append(time.perf_counter() - t0)

    model.eval()
    prompts = torch.tensor([[(i * 31 + j * 7) % vocab for j in range(SAMPLE_PROMPT)] for i in range(BATCH)])
    sample_seconds = []
    with torch.no_grad():
        for _ in range(3):
            t0 = time.perf_counter()
            out = model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=False,
                                 max_new_tokens=NEW, min_new_tokens=NEW, use_cache=True,
                                 pad_token_id=tok.pad_token_id)
            sample_seconds.append(time.perf_counter() - t0)
            assert out.shape[1] == SAMPLE_PROMPT + NEW
    print(json.dumps({"step_seconds": step_seconds, "sample_seconds": sample_seconds,
                      "torch_threads": torch.get_num_threads(), "mixed_precision": trainer.accelerator.mixed_precision}))


if __name__ == "__main__":
    main()
