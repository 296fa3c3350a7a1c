// Package completion samples text completions of text prompts from a
// model, as mcprl generate writes them: each prompt is encoded, sampled in
// batches with the model's KV cache, and decoded, with the sampled ids,
// their log-probs and why the completion stopped.
//
// Prompts are given as text (special tokens in it become their ids) or
// rendered from tasks as a rollout's first turn renders them (TaskPrompts).
// Open loads what mcprl generate completes (a Source: the model and a
// prompt or a tasks file) and Job.Write samples and writes it.
package completion
