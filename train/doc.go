// Package train holds what mcprl's trainers (grpo, sft) share, as the transformers Trainer does:
//
//   - Arguments: TrainingArguments' names and defaults, and Decode, which reads a trainer's YAML
//     config with unknown keys and wrong types reported by key and line;
//   - the learning-rate schedules of transformers (linear with warmup, constant, cosine), torch's
//     clip_grad_norm_ and torch.optim.AdamW's update as graph functions, and Optimizer, which
//     accumulates micro-batch gradients and applies them, its state in the model's context;
//   - LogWindow and metrics.jsonl, with TRL's logging rules;
//   - checkpoints (model, optimizer state, trainer_state.json), written atomically, and Restore;
//   - Loop, the optimizer-step loop that ties them together around a trainer's own step, with the
//     run log (package runlog: progress, completions.jsonl, TensorBoard events, report.html).
//
// The schedule and AdamW tests compare against torch (grpo/testdata/golden.json).
package train
