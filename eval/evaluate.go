package eval

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/mcprl/mcprl/task"
)

// GoldenCompletionLength is the least token budget ForGolden gives a
// golden replay.
const GoldenCompletionLength = 4096

// ForGolden sizes c to replay tasks' golden trajectories whole: tool rounds
// enough for the longest golden and, unless keepLength (a budget the user
// chose), a token budget of at least GoldenCompletionLength.
func (c *Config) ForGolden(tasks []task.Task, keepLength bool) error {
	gi, err := GoldenIterations(tasks)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	c.MaxToolCallingIterations = max(c.MaxToolCallingIterations, gi)
	if !keepLength {
		c.MaxCompletionLength = max(c.MaxCompletionLength, GoldenCompletionLength)
	}
	return nil
}

// Evaluate runs tasks (Run) and summarizes the samples with pass@k's k
// (Summarize), then writes to e.Progress how long it took and, when
// failures ended trajectories, how many and the first (AllFailed says
// whether any was scored).
func (e *Evaluator) Evaluate(ctx context.Context, tasks []task.Task) ([]*Sample, *Report, error) {
	start := time.Now()
	res, err := e.Run(ctx, tasks)
	if err != nil {
		return nil, nil, err
	}
	rep, err := Summarize(res, e.Config.k())
	if err != nil {
		return nil, nil, err
	}
	w := e.Progress
	if w == nil {
		w = io.Discard
	}
	fmt.Fprintf(w, "eval: %d tasks x %d samples in %.1fs\n", rep.NTasks, e.Config.samples(), time.Since(start).Seconds())
	if rep.NErrors > 0 {
		fmt.Fprintf(w, "eval: %d of %d trajectories failed (a policy server, sandbox or scoring error) and are left out of the rates (n_errors); the first: %s\n",
			rep.NErrors, rep.NTrajectories, FirstError(res))
	}
	return res, rep, nil
}

// AllFailed is the error of an evaluation in which every trajectory failed
// (none was scored), naming the first failure; nil otherwise.
func AllFailed(res []*Sample, rep *Report) error {
	if rep.NErrors == 0 || rep.NScored > 0 {
		return nil
	}
	return fmt.Errorf("eval: every trajectory failed (%d); the first: %s", rep.NErrors, FirstError(res))
}
