// Package runlog writes what a training run leaves to look at, besides its metrics.jsonl and
// checkpoints: the progress on stderr (package progress), TensorBoard event files when report_to names
// tensorboard (package tensorboard), the trajectories of every logging step in completions.jsonl, and the
// run's report page, report.html (package report), rewritten at each checkpoint and at the end.
//
// A trainer opens a Log when its run starts, reports each step and each logging step, says when it saved
// a checkpoint, and closes the Log at the end. Nothing in it links the tensor engine.
package runlog
