package sqldb

import (
	"context"
	"fmt"
	"sync"
)

// This file is the fixture as it was built, before any fork changed it:
// a question's ground truth is computed there, so that a trajectory that
// wipes, rewrites or shadows the data in its own fork cannot move the
// answer it is scored against.

// maxIdleRefs bounds the pristine forks a template keeps for its oracles.
const maxIdleRefs = 2

// maxOracleCache bounds the oracle results a template remembers.
const maxOracleCache = 4096

// pristine holds a template's reference forks: forks no policy statement
// ever ran in. They run trusted SQL only (oracles, read-only; variants,
// rolled back), so they stay as built.
type pristine struct {
	mu      sync.Mutex
	idle    []forkConn
	tables  []Table
	oracles map[string]*Result
	closed  bool
}

// take returns an idle reference fork or a new one.
func (t *Template) takeRef(ctx context.Context) (forkConn, error) {
	p := &t.ref
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		fc := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return fc, nil
	}
	p.mu.Unlock()
	fc, err := t.be.fork(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqldb: fork of the fixture as built: %w", err)
	}
	return fc, nil
}

// putRef returns a reference fork to the pool, or closes it when the pool
// is full, the template closed, or the fork lost its state.
func (t *Template) putRef(fc forkConn) {
	p := &t.ref
	p.mu.Lock()
	if p.closed || fc.lost() != nil || len(p.idle) >= maxIdleRefs {
		p.mu.Unlock()
		fc.close()
		return
	}
	p.idle = append(p.idle, fc)
	p.mu.Unlock()
}

// closeRefs closes the idle reference forks; forks in use close when
// they are put back.
func (t *Template) closeRefs() error {
	p := &t.ref
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	var first error
	for _, fc := range idle {
		if err := fc.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Oracle runs trusted read-only SQL (a reward assertion) on the fixture as
// it was built, before any fork changed it: a question's ground truth.
// Results are cached per SQL text (the fixture never changes); callers
// must not modify them.
func (t *Template) Oracle(ctx context.Context, sql string) (*Result, error) {
	p := &t.ref
	p.mu.Lock()
	if res, ok := p.oracles[sql]; ok {
		p.mu.Unlock()
		return res, nil
	}
	p.mu.Unlock()
	fc, err := t.takeRef(ctx)
	if err != nil {
		return nil, err
	}
	res, err := fc.oracle(ctx, sql, t.limits())
	t.putRef(fc)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.oracles == nil {
		p.oracles = map[string]*Result{}
	}
	if len(p.oracles) < maxOracleCache {
		p.oracles[sql] = res
	}
	p.mu.Unlock()
	return res, nil
}

// Variants is (*DB).Variants on the fixture as it was built: the oracle
// and the policy's queries (read-only, confined) on n copies of the
// fixture's data, each with about half of every table's rows removed.
func (t *Template) Variants(ctx context.Context, n int, oracle string, queries []string) ([][]*Result, error) {
	fc, err := t.takeRef(ctx)
	if err != nil {
		return nil, err
	}
	defer t.putRef(fc)
	p := &t.ref
	p.mu.Lock()
	tables := p.tables
	p.mu.Unlock()
	if tables == nil {
		if tables, err = fc.tables(ctx); err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.tables = tables
		p.mu.Unlock()
	}
	return variants(ctx, fc, tables, n, oracle, queries, t.limits())
}

// Witnessed is (*DB).Witnessed on the fixture as it was built: the oracle
// and the policy's queries (read-only, confined) on a copy of the fixture's
// data that the trusted setup statements changed.
func (t *Template) Witnessed(ctx context.Context, setup []string, oracle string, queries []string) ([]*Result, error) {
	fc, err := t.takeRef(ctx)
	if err != nil {
		return nil, err
	}
	defer t.putRef(fc)
	return witnessed(ctx, fc, setup, oracle, queries, t.limits())
}

func (t *Template) limits() limits {
	return limits{timeout: t.opts.StatementTimeout, maxRows: t.opts.MaxRows, maxBytes: t.opts.MaxBytes}
}
