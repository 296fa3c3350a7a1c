#!/usr/bin/env python3
"""Generate grpo/testdata/golden.json: TRL's GRPO numbers computed by PyTorch.

This is a line-by-line transcription of huggingface/trl trl/trainer/grpo_trainer.py
(commit f2cd57710ae345ea6428ae95363267fcf38a3dc8, 2026-07-24):
  - advantages: _generate_and_score_completions, multi_objective_aggregation="sum_then_normalize",
    with trl.trainer.utils.nanstd;
  - loss and metrics: _compute_loss for loss_type grpo, bnpo, dr_grpo, dapo (one process,
    num_processes=1, train mode), importance_sampling_level token/sequence, beta with k3 KL;
and of the optimisation pieces the Trainer uses:
  - transformers.optimization get_{linear,cosine,constant}_schedule(_with_warmup) lambdas on torch LambdaLR,
  - torch.nn.utils.clip_grad_norm_, torch.optim.AdamW.

Run once with Debian's python3-torch (torch 1.13): /usr/bin/python3 grpo/testdata/golden.py
It is deterministic (fixed seeds) and writes golden.json beside itself.
"""
import json
import math
import os

import torch

torch.set_default_dtype(torch.float64)


# ---------------------------------------------------------------- TRL utils
def nanstd(tensor, dim=None, keepdim=False):
    # torch 1.13's sum() wants explicit dims where newer torch accepts dim=None
    dims = tuple(range(tensor.dim())) if dim is None else dim
    mean = torch.nanmean(tensor, dim=dims, keepdim=True)
    variance = torch.nanmean((tensor - mean) ** 2, dim=dims, keepdim=True)
    count = torch.sum(~torch.isnan(tensor), dim=dims, keepdim=True)  # count of non-NaN values
    correction = count / (count - 1)
    correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
    variance *= correction
    std = torch.sqrt(variance)
    if keepdim:
        return std
    if dim is None:
        return std.squeeze()
    return std.squeeze(dim)


def nanmin(t):
    if torch.isnan(t).all():
        return torch.tensor(float("nan"))
    return torch.min(t[~torch.isnan(t)])


def nanmax(t):
    if torch.isnan(t).all():
        return torch.tensor(float("nan"))
    return torch.max(t[~torch.isnan(t)])


# ---------------------------------------------------------------- advantages
def advantages(rewards, num_generations, scale_rewards):
    rewards = rewards.clone()
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale_rewards in ["group", "none"]:
        if num_generations > 1:
            std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
            std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
        else:
            std_rewards = torch.zeros_like(rewards)
    elif scale_rewards == "batch":
        if rewards.numel() > 1:
            std_rewards = nanstd(rewards).expand_as(rewards)
        else:
            std_rewards = torch.zeros_like(rewards)
    adv = rewards - mean_grouped_rewards
    if scale_rewards != "none":
        adv = adv / (std_rewards + 1e-4)
    is_std_zero = torch.isclose(std_rewards, torch.zeros_like(std_rewards))
    adv = torch.nan_to_num(adv, nan=0.0)
    return {
        "advantages": adv.tolist(),
        "frac_reward_zero_std": is_std_zero.double().mean().item(),
        "reward": torch.nanmean(rewards).item(),
        "reward_std": nanstd(rewards).item(),
    }


# ---------------------------------------------------------------- loss (_compute_loss)
def compute_loss(cfg, per_token_logps, old_per_token_logps, ref_per_token_logps, mask, advantages,
                 num_items_in_batch):
    loss_type = cfg["loss_type"]
    epsilon_low, epsilon_high, beta = cfg["epsilon"], cfg["epsilon_high"], cfg["beta"]
    importance_sampling_level = cfg["importance_sampling_level"]
    current_gradient_accumulation_steps = cfg["gradient_accumulation_steps"]
    max_completion_length = cfg["max_completion_length"]

    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    old_per_token_logps = per_token_logps.detach() if old_per_token_logps is None else old_per_token_logps

    log_ratio = per_token_logps - old_per_token_logps
    if importance_sampling_level == "token":
        log_importance_weights = log_ratio
    elif importance_sampling_level == "sequence":
        log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        log_importance_weights = log_importance_weights.unsqueeze(-1)
    coef_1 = torch.exp(log_importance_weights)

    if beta != 0.0:
        per_token_kl = (
            torch.exp(ref_per_token_logps - per_token_logps) - (ref_per_token_logps - per_token_logps) - 1
        )

    coef_2 = torch.clamp(coef_1, 1 - epsilon_low, 1 + epsilon_high)
    per_token_loss1 = coef_1 * advantages
    per_token_loss2 = coef_2 * advantages
    per_token_loss = -torch.min(per_token_loss1, per_token_loss2)
    if beta != 0.0:
        per_token_loss = per_token_loss + beta * per_token_kl

    if loss_type == "grpo":
        loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
        loss = loss / current_gradient_accumulation_steps
    elif loss_type == "bnpo":
        loss = (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
        loss = loss / current_gradient_accumulation_steps
    elif loss_type == "dr_grpo":
        loss = (per_token_loss * mask).sum() / (per_token_loss.size(0) * max_completion_length)
        loss = loss / current_gradient_accumulation_steps
    elif loss_type == "dapo":
        normalizer = num_items_in_batch.clamp(min=1.0) / 1  # accelerator.num_processes
        loss = (per_token_loss * mask).sum() / normalizer

    def masked_seq_mean(x):
        if x.shape[1] == 1:
            return x.squeeze(1)
        return (x * mask).sum(-1) / mask.sum(-1)

    def global_masked_mean(x):
        if x.shape[1] == 1:
            local_sum, local_count = x.sum(), torch.tensor(float(x.shape[0]))
        else:
            local_sum, local_count = (x * mask).sum(), mask.sum().double()
        totals = torch.stack([local_sum, local_count])
        return (totals[0] / totals[1].clamp(min=1.0)).item()

    metrics = {}
    if beta != 0.0:
        metrics["kl"] = global_masked_mean(per_token_kl)
    is_low_clipped = (coef_1 < 1 - epsilon_low) & (advantages < 0)
    is_high_clipped = (coef_1 > 1 + epsilon_high) & (advantages > 0)
    is_region_clipped = is_low_clipped | is_high_clipped
    metrics["clip_ratio/low_mean"] = global_masked_mean(is_low_clipped.double())
    metrics["clip_ratio/high_mean"] = global_masked_mean(is_high_clipped.double())
    metrics["clip_ratio/region_mean"] = global_masked_mean(is_region_clipped.double())
    metrics["clip_ratio/low_min"] = nanmin(masked_seq_mean(is_low_clipped.double())).item()
    metrics["clip_ratio/high_max"] = nanmax(masked_seq_mean(is_high_clipped.double())).item()
    return loss, metrics


def jnum(x):
    """JSON has no NaN: write it as the string "NaN"."""
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    return x


def loss_cases():
    gen = torch.Generator().manual_seed(1234)
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

    cases = []
    for loss_type in ["grpo", "bnpo", "dr_grpo", "dapo"]:
        for level in ["token", "sequence"]:
            for beta in [0.0, 0.04]:
                for eps, eps_high in [(0.2, 0.2), (0.2, 0.28)]:
                    for ga, use_old in [(1, True), (4, True), (2, False)]:
                        if not use_old and (beta != 0.0 or eps_high != 0.2):
                            continue
                        cfg = dict(loss_type=loss_type, importance_sampling_level=level, beta=beta,
                                   epsilon=eps, epsilon_high=eps_high, gradient_accumulation_steps=ga,
                                   max_completion_length=9)
                        lp = logp.clone().requires_grad_(True)
                        loss, metrics = compute_loss(cfg, lp, old if use_old else None, ref, mask, adv,
                                                     num_items_in_batch)
                        loss.backward()
                        name = f"{loss_type}/{level}/beta={beta}/eps={eps},{eps_high}/ga={ga}/old={use_old}"
                        cases.append({
                            "name": name,
                            "config": cfg,
                            "use_old": use_old,
                            "loss": loss.item(),
                            "grad": lp.grad.tolist(),
                            "metrics": {k: jnum(v) for k, v in metrics.items()},
                        })
    inputs = {
        "logp": logp.tolist(), "old_logp": old.tolist(), "ref_logp": ref.tolist(), "mask": mask.tolist(),
        "advantages": adv.tolist(), "num_items_in_batch": num_items_in_batch.item(),
    }
    return inputs, cases


def advantage_cases():
    gen = torch.Generator().manual_seed(99)
    out = []
    rewards_sets = {
        # 3 groups of 4: mixed, all equal (zero std), mixed with negatives
        "mixed": ([0.0, 1.0, 0.3, 0.6, 1.0, 1.0, 1.0, 1.0, -0.5, 0.1, 1.0, 0.1], 4),
        "random": ((torch.rand(16, generator=gen) * 2 - 0.5).tolist(), 8),
        "with_nan": ([0.7, float("nan"), 0.1, 0.7, float("nan"), float("nan"), float("nan"), 0.4], 4),
        "pairs": ([1.0, 0.0, 0.5, 0.5, 0.2, 0.9], 2),
    }
    for name, (rewards, g) in rewards_sets.items():
        for scale in ["group", "batch", "none"]:
            res = advantages(torch.tensor(rewards), g, scale)
            out.append({
                "name": f"{name}/{scale}", "rewards": [jnum(r) for r in rewards], "num_generations": g,
                "scale_rewards": scale,
                **{k: ([jnum(x) for x in v] if isinstance(v, list) else jnum(v)) for k, v in res.items()},
            })
    return out


# ---------------------------------------------------------------- schedules (transformers.optimization)
def lr_lambda(kind, num_warmup_steps, num_training_steps):
    def linear(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))

    def cosine(current_step, num_cycles=0.5):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))

    def constant_with_warmup(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1.0, num_warmup_steps))
        return 1.0

    return {"linear": linear, "cosine": cosine, "constant": lambda _: 1.0,
            "constant_with_warmup": constant_with_warmup}[kind]


def schedule_cases():
    out = []
    for kind in ["linear", "cosine", "constant", "constant_with_warmup"]:
        for total, warmup_ratio in [(20, 0.1), (7, 0.0), (13, 0.25)]:
            warmup = math.ceil(total * warmup_ratio)  # TrainingArguments.get_warmup_steps
            p = torch.nn.Parameter(torch.zeros(1))
            opt = torch.optim.AdamW([p], lr=3e-4)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(kind, warmup, total))
            lrs = []
            for _ in range(total + 1):
                lrs.append(opt.param_groups[0]["lr"])
                opt.step()
                sched.step()
            out.append({"kind": kind, "total": total, "warmup_ratio": warmup_ratio, "base_lr": 3e-4, "lrs": lrs})
    return out


def optimizer_cases():
    gen = torch.Generator().manual_seed(7)
    shapes = [(3, 4), (5,), (2,)]
    p0 = [torch.randn(*s, generator=gen) for s in shapes]
    steps = 6
    grads = [[torch.randn(*s, generator=gen) * 3 for s in shapes] for _ in range(steps)]
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


def main():
    inputs, cases = loss_cases()
    golden = {
        "source": "huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py; torch " + torch.__version__,
        "loss_inputs": inputs,
        "loss_cases": cases,
        "advantage_cases": advantage_cases(),
        "schedule_cases": schedule_cases(),
        "adamw": optimizer_cases(),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(cases)} loss cases, {len(golden['advantage_cases'])} advantage cases")


if __name__ == "__main__":
    main()
