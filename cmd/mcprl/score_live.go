package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// liveRunner runs a completion's tool calls in a fresh fork of its task's
// sandbox, one factory per fixture, made on first use.
type liveRunner struct {
	fixtures map[string]*task.Fixture
	dsn      string

	mu        sync.Mutex
	factories map[string]*factoryOnce
}

type factoryOnce struct {
	once sync.Once
	f    *sandbox.Factory
	err  error
}

func newLiveRunner(fixtures map[string]*task.Fixture, dsn string) *liveRunner {
	return &liveRunner{fixtures: fixtures, dsn: dsn, factories: map[string]*factoryOnce{}}
}

func (r *liveRunner) factory(ctx context.Context, name string) (*sandbox.Factory, error) {
	fx, ok := r.fixtures[name]
	if !ok {
		return nil, fmt.Errorf("fixture %q not found in --fixtures", name)
	}
	r.mu.Lock()
	fo := r.factories[name]
	if fo == nil {
		fo = &factoryOnce{}
		r.factories[name] = fo
	}
	r.mu.Unlock()
	fo.once.Do(func() {
		// The factory outlives this call's context: it serves every completion.
		fo.f, fo.err = sandbox.NewFactory(context.WithoutCancel(ctx), fx, sandbox.Options{DSN: r.dsn})
	})
	return fo.f, fo.err
}

// run executes the completion's well-formed calls in order in a new fork
// and returns the fork (the caller closes it) and the trajectory. A tool
// server failure ends the trajectory with Error set, as a rollout would.
func (r *liveRunner) run(ctx context.Context, t *task.Task, completion string) (*sandbox.Sandbox, *chat.Trajectory, error) {
	if t == nil {
		return nil, nil, errors.New("no task for this completion")
	}
	if t.Fixture == "" {
		return nil, nil, fmt.Errorf("task %q names no fixture", t.ID)
	}
	f, err := r.factory(ctx, t.Fixture)
	if err != nil {
		return nil, nil, err
	}
	sb, err := f.Fork(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("fork sandbox for task %q: %w", t.ID, err)
	}
	traj, err := reward.Replay(ctx, sb, completion)
	if err != nil {
		sb.Close()
		return nil, nil, err
	}
	return sb, traj, nil
}

func toolNames(sb *sandbox.Sandbox) []string {
	var names []string
	for _, t := range sb.Tools() {
		names = append(names, t.Name)
	}
	return names
}

// Close closes every factory made.
func (r *liveRunner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, fo := range r.factories {
		if fo.f != nil {
			errs = append(errs, fo.f.Close())
		}
	}
	return errors.Join(errs...)
}
