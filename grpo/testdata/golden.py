"""Generate grpo/testdata/golden.json: GRPO numbers computed by TRL's own GRPOTrainer and transformers.

Nothing here re-implements TRL. With the versions of python/requirements.lock:
  - loss, gradient and metrics: trl.GRPOTrainer._compute_loss on a GRPOTrainer built for a tiny Qwen2, with
    _get_per_token_logps_and_entropies replaced by one returning the prepared per-token log-probs (the model's
    forward pass is checked separately, python/tests/test_model.py), for loss_type grpo, bnpo, dr_grpo, dapo,
    importance_sampling_level token/sequence, beta 0/0.04 with use_bias_correction_kl on and off, epsilon_high,
    gradient accumulation, steps_per_generation;
  - advantages and reward metrics: trl.GRPOTrainer._generate_and_score_completions on that trainer (it samples with
    the tiny model; the reward function returns the prepared rewards, None for NaN), every scale_rewards;
  - learning-rate schedules: transformers.get_scheduler on torch's AdamW;
  - clipping and AdamW: torch.nn.utils.clip_grad_norm_ and torch.optim.AdamW with transformers' two groups.

Run from the repository root after scripts/test-setup.sh:  .venv/bin/python grpo/testdata/golden.py
Deterministic (fixed seeds, float64 inputs); writes golden.json beside itself.
"""

from __future__ import annotations

import json
import math
import pathlib
import tempfile
from typing import Any

import torch
import transformers
import trl
from datasets import Dataset
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM, get_scheduler
from trl import GRPOConfig, GRPOTrainer

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]


def jnum(x: float) -> float | str:
    """JSON has no NaN: write it as the string "NaN"."""
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    return x


def make_trainer(num_generations: int, batch: int) -> GRPOTrainer:
    """A GRPOTrainer on a tiny random Qwen2 whose one reward function returns each row's "r" column."""
    tok = AutoTokenizer.from_pretrained(str(REPO / "tokenizer/small/qwen2.5-2048"))
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        vocab_size=len(tok), max_position_embeddings=64, tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id))

    def given(completions: list[Any], r: list[float], **_: Any) -> list[float | None]:
        return [None if math.isnan(x) else x for x in r]

    args = GRPOConfig(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=batch, num_generations=num_generations,
                      max_completion_length=4, report_to=[], use_cpu=True, save_strategy="no", seed=0)
    ds = Dataset.from_list([{"prompt": "hi", "r": 0.0}] * batch)
    trainer = GRPOTrainer(model=model, reward_funcs=[given], args=args, train_dataset=ds, processing_class=tok)
    trainer.model.train()
    return trainer


def loss_cases(trainer: GRPOTrainer) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    gen = torch.Generator().manual_seed(1234)
    torch.set_default_dtype(torch.float64)
    B, T = 6, 7
    logp = -torch.rand(B, T, generator=gen) * 3.0 - 0.05
    ref = logp + torch.randn(B, T, generator=gen) * 0.2
    mask = torch.ones(B, T)
    mask[0, 5:] = 0          # padding
    mask[1, 2:4] = 0         # a tool observation inside the completion
    mask[2, :] = 0           # a truncated completion masked out entirely (mask_truncated_completions)
    mask[3, 6] = 0
    mask[5, 4:] = 0
    adv = torch.tensor([1.3, -0.7, 0.4, -1.9, 0.0, 0.8])
    # Ratios pi/pi_old chosen to fall in every region: below 1-eps, inside, exactly 1, between 1+0.2 and
    # 1+0.28, above 1+0.28; per-sequence mean log-ratios (GSPO) likewise differ by row.
    pattern = torch.log(torch.tensor([0.55, 0.85, 1.0, 1.1, 1.25, 1.35, 1.6]))
    seq_target = torch.tensor([0.22, -0.3, 0.1, 0.15, 0.05, 0.3])
    log_r = torch.zeros(B, T)
    for b in range(B):
        row = torch.roll(pattern, shifts=b)
        m = mask[b]
        mean = (row * m).sum() / m.sum().clamp(min=1.0)
        log_r[b] = row - mean + seq_target[b]
    old = logp - log_r
    num_items_in_batch = mask.sum() * 2 + 3  # the generation batch holds other micro-batches too
    entropies = torch.rand(B, T, generator=gen)
    torch.set_default_dtype(torch.float32)

    current: dict[str, torch.Tensor] = {}
    # The per-token log-probs come from the prepared tensor instead of a forward pass; everything after is TRL's.
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (current["logp"], entropies, None)

    cases = []
    for loss_type in ["grpo", "bnpo", "dr_grpo", "dapo"]:
        for level in ["token", "sequence"]:
            for beta, bias_correction in [(0.0, True), (0.04, True), (0.04, False)]:
                for eps, eps_high in [(0.2, 0.2), (0.2, 0.28)]:
                    for ga, spg, use_old in [(1, 1, True), (4, 4, True), (2, 2, False), (2, 4, True)]:
                        if not use_old and (beta != 0.0 or eps_high != 0.2):
                            continue
                        if not bias_correction and (ga != 1 or eps_high != 0.2):
                            continue
                        if spg != ga and (loss_type != "dapo" or beta != 0.0):
                            continue  # steps_per_generation enters only dapo's normaliser
                        trainer.loss_type, trainer.importance_sampling_level, trainer.beta = loss_type, level, beta
                        trainer.epsilon_low, trainer.epsilon_high = eps, eps_high
                        trainer.current_gradient_accumulation_steps = ga
                        trainer.args.steps_per_generation = spg
                        trainer.max_completion_length = 9
                        trainer.args.use_bias_correction_kl = bias_correction
                        trainer._metrics["train"].clear()
                        current["logp"] = logp.clone().requires_grad_(True)
                        inputs = {
                            "prompt_ids": torch.zeros(B, 1, dtype=torch.long),
                            "prompt_mask": torch.ones(B, 1, dtype=torch.long),
                            "completion_ids": torch.zeros(B, T, dtype=torch.long),
                            "completion_mask": mask,
                            "advantages": adv,
                            "ref_per_token_logps": ref,
                            "num_items_in_batch": num_items_in_batch,
                        }
                        if use_old:
                            inputs["old_per_token_logps"] = old
                        loss = trainer._compute_loss(trainer.model, inputs)
                        loss.backward()
                        metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k != "entropy"}
                        cfg = dict(loss_type=loss_type, importance_sampling_level=level, beta=beta, epsilon=eps,
                                   epsilon_high=eps_high, gradient_accumulation_steps=ga, steps_per_generation=spg,
                                   max_completion_length=9, use_bias_correction_kl=bias_correction)
                        cases.append({
                            "name": f"{loss_type}/{level}/beta={beta}/bc={bias_correction}/eps={eps},{eps_high}/ga={ga}"
                                    f"/spg={spg}/old={use_old}",
                            "config": cfg, "use_old": use_old, "loss": loss.item(),
                            "grad": current["logp"].grad.tolist(),
                            "metrics": {k: jnum(float(v)) for k, v in metrics.items()},
                        })
    inputs_json = {
        "logp": logp.tolist(), "old_logp": old.tolist(), "ref_logp": ref.tolist(), "mask": mask.tolist(),
        "advantages": adv.tolist(), "num_items_in_batch": num_items_in_batch.item(),
    }
    return inputs_json, cases


def advantage_cases() -> list[dict[str, Any]]:
    gen = torch.Generator().manual_seed(99)
    rewards_sets = {
        # 3 groups of 4: mixed, all equal (zero std), mixed with negatives
        "mixed": ([0.0, 1.0, 0.3, 0.6, 1.0, 1.0, 1.0, 1.0, -0.5, 0.1, 1.0, 0.1], 4),
        "random": ((torch.rand(16, generator=gen) * 2 - 0.5).tolist(), 8),
        "with_nan": ([0.7, float("nan"), 0.1, 0.7, float("nan"), float("nan"), float("nan"), 0.4], 4),
        "pairs": ([1.0, 0.0, 0.5, 0.5, 0.2, 0.9], 2),
    }
    out = []
    for name, (rewards, g) in rewards_sets.items():
        trainer = make_trainer(g, len(rewards))
        for scale in ["group", "batch", "none"]:
            trainer.scale_rewards = scale
            trainer._metrics["train"].clear()
            res = trainer._generate_and_score_completions([{"prompt": "hi", "r": r} for r in rewards])
            m = trainer._metrics["train"]
            out.append({
                "name": f"{name}/{scale}", "rewards": [jnum(r) for r in rewards], "num_generations": g,
                "scale_rewards": scale, "advantages": [jnum(float(a)) for a in res["advantages"].tolist()],
                "frac_reward_zero_std": jnum(m["frac_reward_zero_std"][-1]), "reward": jnum(m["reward"][-1]),
                "reward_std": jnum(m["reward_std"][-1]),
            })
    return out


def schedule_cases() -> list[dict[str, Any]]:
    out = []
    for kind in ["linear", "cosine", "constant", "constant_with_warmup"]:
        for total, warmup_ratio in [(20, 0.1), (7, 0.0), (13, 0.25)]:
            warmup = math.ceil(total * warmup_ratio)  # TrainingArguments.get_warmup_steps
            p = torch.nn.Parameter(torch.zeros(1))
            opt = torch.optim.AdamW([p], lr=3e-4)
            sched = get_scheduler(kind, opt, num_warmup_steps=warmup, num_training_steps=total)
            lrs = []
            for _ in range(total + 1):
                lrs.append(opt.param_groups[0]["lr"])
                opt.step()
                sched.step()
            out.append({"kind": kind, "total": total, "warmup_ratio": warmup_ratio, "base_lr": 3e-4, "lrs": lrs})
    return out


def optimizer_cases() -> dict[str, Any]:
    gen = torch.Generator().manual_seed(7)
    shapes = [(3, 4), (5,), (2,)]
    p0 = [torch.randn(*s, generator=gen, dtype=torch.float64) for s in shapes]
    steps = 6
    grads = [[torch.randn(*s, generator=gen, dtype=torch.float64) * 3 for s in shapes] for _ in range(steps)]
    lrs = [1e-3 * (i + 1) / steps for i in range(steps)]
    max_norm = 1.0
    params = [torch.nn.Parameter(p.clone()) for p in p0]
    # transformers' two parameter groups: weight decay on the first two tensors, none on the third ("bias")
    opt = torch.optim.AdamW([{"params": params[:2], "weight_decay": 0.1},
                             {"params": params[2:], "weight_decay": 0.0}],
                            lr=lrs[0], betas=(0.9, 0.999), eps=1e-8)
    history, norms = [], []
    for t in range(steps):
        for p, g in zip(params, grads[t]):
            p.grad = g.clone()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        norms.append(norm.item())
        for group in opt.param_groups:
            group["lr"] = lrs[t]
        opt.step()
        history.append([p.detach().clone().tolist() for p in params])
    return {
        "shapes": shapes, "p0": [p.tolist() for p in p0],
        "grads": [[g.tolist() for g in gs] for gs in grads], "lrs": lrs, "max_norm": max_norm,
        "weight_decay": [0.1, 0.1, 0.0], "betas": [0.9, 0.999], "eps": 1e-8,
        "grad_norms": norms, "params": history,
    }


def main() -> None:
    inputs, cases = loss_cases(make_trainer(2, 2))
    golden = {
        "source": f"trl {trl.__version__} GRPOTrainer._compute_loss and _generate_and_score_completions; "
                  f"transformers {transformers.__version__} get_scheduler; torch {torch.__version__} AdamW",
        "loss_inputs": inputs,
        "loss_cases": cases,
        "advantage_cases": advantage_cases(),
        "schedule_cases": schedule_cases(),
        "adamw": optimizer_cases(),
    }
    path = HERE / "golden.json"
    path.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {path}: {len(cases)} loss cases, {len(golden['advantage_cases'])} advantage cases")


if __name__ == "__main__":
    main()
