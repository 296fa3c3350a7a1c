// Package eval measures a policy on tasks in live sandboxes: every task is
// run n times through the same rollout loop training uses (each trajectory
// in its own sandbox fork, tool calls executed over MCP), each trajectory is
// scored by its task's ground_truth_assertions while its sandbox is still
// open, and the trajectories are summarised as success rate, pass@k (the
// unbiased estimator), tool accuracy, hallucinated-tool and format-error
// rates, mean turns and self-correction rate, overall and per category.
//
// The policy is anything that implements policy.Policy: a model
// (model.Policy), or a scripted replay of each task's golden trajectory
// (Golden), which is the upper bound a careful agent reaches and a check
// that a task set's assertions hold.
package eval
