package taskgen

import (
	"context"

	"github.com/mcprl/mcprl/task"
)

// GenerateTraps is Generate that also returns, by task id, each edge
// case's natural first query: the one the generator checked to fail.
func GenerateTraps(ctx context.Context, fx *task.Fixture, opts Options) ([]task.Task, map[string]string, error) {
	var traps map[string]string
	opts.traps = &traps
	tasks, err := Generate(ctx, fx, opts)
	return tasks, traps, err
}
