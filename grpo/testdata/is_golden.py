#!/usr/bin/env python3
"""Generate grpo/testdata/is_golden.json: TRL's importance-sampling correction computed by PyTorch.

A line-by-line transcription of huggingface/trl trl/trainer/grpo_trainer.py (commit
f2cd57710ae345ea6428ae95363267fcf38a3dc8, 2026-07-24): the vllm_importance_sampling_correction block of
_generate_and_score_completions (ratio per mode, clip_min/clip_max), its sampling/* metrics, and in
_compute_loss the product per_token_loss * importance_sampling_ratio (loss types grpo and dapo, token
level, num_iterations 1: old_per_token_logps are the trainer's own, so coef_1 = 1).

Run with any torch >= 1.13: python3 grpo/testdata/is_golden.py (deterministic; writes is_golden.json).
"""
import json
import math
import os

import torch

torch.set_default_dtype(torch.float64)


def is_ratio(mode, clip_min, clip_max, old_per_token_logps, sampling_per_token_logps, mask):
    per_token_logps_diff = (old_per_token_logps - sampling_per_token_logps) * mask
    sequence_level_is = mode in ["sequence_mask", "sequence_truncate"]
    if sequence_level_is:
        logps_diff = per_token_logps_diff.sum(dim=-1, keepdim=True)
    else:
        logps_diff = per_token_logps_diff
    ratio = torch.exp(logps_diff)
    if mode in ["sequence_truncate", "token_truncate"]:
        ratio = torch.clamp(ratio, min=clip_min, max=clip_max)
    else:
        min_val = clip_min if clip_min is not None else -math.inf
        max_val = clip_max if clip_max is not None else math.inf
        invalid = (ratio < min_val) | (ratio > max_val)
        ratio = ratio.masked_fill(invalid, value=0.0)

    delta = torch.abs(old_per_token_logps - sampling_per_token_logps)
    bmask = mask.bool()
    delta = delta[bmask]
    metrics = {
        "sampling/sampling_logp_difference/mean": torch.mean(delta).item() if delta.numel() > 0 else 0.0,
        "sampling/sampling_logp_difference/max": torch.max(delta).item() if delta.numel() > 0 else 0.0,
    }
    flat = ratio.flatten() if sequence_level_is else ratio[bmask]
    metrics["sampling/importance_sampling_ratio/min"] = torch.min(flat).item() if flat.numel() > 0 else 0.0
    metrics["sampling/importance_sampling_ratio/mean"] = torch.mean(flat).item() if flat.numel() > 0 else 0.0
    metrics["sampling/importance_sampling_ratio/max"] = torch.max(flat).item() if flat.numel() > 0 else 0.0
    return ratio, metrics


def loss_with_is(loss_type, per_token_logps, mask, advantages, ratio, num_items_in_batch):
    advantages = advantages.unsqueeze(1)
    old_per_token_logps = per_token_logps.detach()
    coef_1 = torch.exp(per_token_logps - old_per_token_logps)
    coef_2 = torch.clamp(coef_1, 1 - 0.2, 1 + 0.28)
    per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
    per_token_loss = per_token_loss * ratio
    if loss_type == "grpo":
        return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    return (per_token_loss * mask).sum() / num_items_in_batch.clamp(min=1.0)


def main():
    gen = torch.Generator().manual_seed(77)
    B, T = 5, 8
    logp = -torch.rand(B, T, generator=gen) * 3.0 - 0.05  # the trainer's log-probs
    # The sampler's: small rounding gaps on most rows, large ones on rows 2 and 3 (a sampler that drifted).
    noise = torch.randn(B, T, generator=gen)
    scale = torch.tensor([1e-6, 0.05, 0.4, 0.9, 0.02]).unsqueeze(1)
    sampling = logp + noise * scale
    mask = torch.ones(B, T)
    mask[0, 6:] = 0   # padding
    mask[1, 2:4] = 0  # a tool observation
    mask[4, :] = 0    # a completion masked out entirely
    adv = torch.tensor([0.9, -1.1, 0.5, 1.4, -0.3])
    num_items = mask.sum() + 4
    cases = []
    for mode in ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]:
        for clip_min, clip_max in [(None, 3.0), (0.5, 2.0), (0.8, None)]:
            ratio, metrics = is_ratio(mode, clip_min, clip_max, logp, sampling, mask)
            full = ratio.expand(B, T)
            losses = {}
            for loss_type in ["grpo", "dapo"]:
                lp = logp.clone().requires_grad_(True)
                loss = loss_with_is(loss_type, lp, mask, adv, ratio, num_items)
                loss.backward()
                losses[loss_type] = {"loss": loss.item(), "grad": lp.grad.tolist()}
            cases.append({"mode": mode, "clip_min": clip_min, "clip_max": clip_max,
                          "ratio": full.tolist(), "metrics": metrics, "losses": losses})
    out = {
        "source": "huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py; torch " + torch.__version__,
        "inputs": {"logp": logp.tolist(), "sampling_logp": sampling.tolist(), "mask": mask.tolist(),
                   "advantages": adv.tolist(), "num_items_in_batch": num_items.item()},
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "is_golden.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
