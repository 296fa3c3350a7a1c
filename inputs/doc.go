// Package inputs loads what a run works on, once: the policy model with its
// tokenizer and chat template, the tasks read with their fixtures, and a
// sandbox factory per fixture the tasks use (each fixture's database built
// once, forked per trajectory).
//
// train, sft, eval, tasks distill and generate load through it. A run
// without a model of its own (a served policy, a golden replay) gives the
// tokenizer instead (LoadTasks).
package inputs
