// Package grpo is the math and configuration half of mcprl's GRPO trainer, written to match
// Hugging Face TRL's GRPOTrainer (trl/trainer/grpo_trainer.py) number for number.
//
// It holds:
//   - Config: TRL GRPOConfig's (and transformers TrainingArguments') knob names and defaults,
//     read from YAML with unknown keys and wrong types reported by key and line;
//   - Advantages: group-relative advantages with scale_rewards "group", "batch" or "none",
//     Bessel-corrected std plus 1e-4 as TRL, frac_reward_zero_std, and a dynamic-sampling
//     helper that drops groups whose rewards all agree;
//   - Loss: the clipped surrogate as a GoMLX graph (token- or sequence-level importance
//     ratios, epsilon/epsilon_high, k3 KL to a reference model, the grpo, bnpo, dr_grpo and
//     dapo aggregations including TRL's division by gradient_accumulation_steps and dapo's
//     num_items_in_batch) with the metrics TRL logs;
//   - the learning-rate schedules of transformers (linear with warmup, constant, cosine),
//     torch's clip_grad_norm_ and torch.optim.AdamW's update, as graph functions.
//
// Golden values in testdata were produced by a PyTorch transcription of TRL's formulas
// (testdata/golden.py) and the tests check this package against them.
package grpo
