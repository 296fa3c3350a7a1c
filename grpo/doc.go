// Package grpo is mcprl's GRPO trainer, written to match Hugging Face TRL's GRPOTrainer
// (trl/trainer/grpo_trainer.py) number for number.
//
// It holds:
//   - Config: TRL GRPOConfig's knob names and defaults (with the TrainingArguments of package
//     train inlined), read from YAML with unknown keys and wrong types reported by key and line;
//   - Advantages: group-relative advantages with scale_rewards "group", "batch" or "none",
//     Bessel-corrected std plus 1e-4 as TRL, frac_reward_zero_std, and a dynamic-sampling
//     helper that drops groups whose rewards all agree;
//   - Loss: the clipped surrogate as a GoMLX graph (token- or sequence-level importance
//     ratios, epsilon/epsilon_high, k3 KL to a reference model, the grpo, bnpo, dr_grpo and
//     dapo aggregations including TRL's division by gradient_accumulation_steps and dapo's
//     num_items_in_batch) with the metrics TRL logs;
//   - Trainer: the rollout step (trajectories sampled against live sandboxes and scored while
//     their sandboxes are open), advantages and loss, run by train.Loop, which owns what
//     every trainer shares (AdamW, schedules, metrics.jsonl, checkpoints and resumption).
//
// Golden values in testdata were produced by a PyTorch transcription of TRL's formulas
// (testdata/golden.py) and the tests check this package against them.
package grpo
