package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mcprl/mcprl/task"
)

// Factories makes one Factory per fixture, on first use, all with the same
// Options, and closes them together. It is safe for concurrent use.
type Factories struct {
	fixtures map[string]*task.Fixture
	opts     Options

	mu        sync.Mutex
	factories map[string]*factoryOnce
}

type factoryOnce struct {
	once sync.Once
	f    *Factory
	err  error
}

// NewFactories returns the Factories of fixtures (by name).
func NewFactories(fixtures map[string]*task.Fixture, opts Options) *Factories {
	return &Factories{fixtures: fixtures, opts: opts, factories: map[string]*factoryOnce{}}
}

// Get returns the factory of the named fixture, building it the first
// time. The factory outlives ctx: it serves every later call.
func (fs *Factories) Get(ctx context.Context, name string) (*Factory, error) {
	fx, ok := fs.fixtures[name]
	if !ok {
		return nil, fmt.Errorf("fixture %q not found", name)
	}
	fs.mu.Lock()
	fo := fs.factories[name]
	if fo == nil {
		fo = &factoryOnce{}
		fs.factories[name] = fo
	}
	fs.mu.Unlock()
	fo.once.Do(func() {
		fo.f, fo.err = NewFactory(context.WithoutCancel(ctx), fx, fs.opts)
		if fo.err != nil {
			fo.err = fmt.Errorf("fixture %q: %w", name, fo.err)
		}
	})
	return fo.f, fo.err
}

// Start builds the factories of the named fixtures now (each once, in
// the order named) and returns them by name, so that a fixture that
// cannot be built fails before any work. They stay open until Close.
func (fs *Factories) Start(ctx context.Context, names []string) (map[string]*Factory, error) {
	started := make(map[string]*Factory, len(names))
	for _, name := range names {
		if started[name] != nil {
			continue
		}
		f, err := fs.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		started[name] = f
	}
	return started, nil
}

// Fork forks a sandbox of task t's fixture.
func (fs *Factories) Fork(ctx context.Context, t *task.Task) (*Sandbox, error) {
	if t.Fixture == "" {
		return nil, fmt.Errorf("task %q names no fixture", t.ID)
	}
	f, err := fs.Get(ctx, t.Fixture)
	if err != nil {
		return nil, err
	}
	sb, err := f.Fork(ctx)
	if err != nil {
		return nil, fmt.Errorf("fork sandbox for task %q: %w", t.ID, err)
	}
	return sb, nil
}

// Close closes every factory made.
func (fs *Factories) Close() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var errs []error
	for _, fo := range fs.factories {
		if fo.f != nil {
			errs = append(errs, fo.f.Close())
		}
	}
	return errors.Join(errs...)
}
