// Package rundir guards a training run's output folder. One run at a time
// holds a folder: Acquire takes an exclusive lock on its run.lock file
// (released by the kernel when the process ends, however it ends) and
// writes who holds it, so a second run on the folder fails at once with an
// error naming the holder. Previous lists what an earlier run left there
// (checkpoints, final model, metrics), so that a fresh run does not start
// over them by accident, and Clear removes it when the user asks to
// overwrite.
package rundir
