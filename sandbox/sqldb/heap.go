package sqldb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite's heap accounting is process-global: it must be switched on
// before the first connection in the process opens (SQLite initializes
// then), and its hard heap limit bounds every connection of the process
// together. modernc.org/sqlite builds with SQLITE_DEFAULT_MEMSTATUS=0, so
// without this the limit is not enforced and no statement's memory can be
// seen. This is the one place sqldb reaches past database/sql into the
// engine's C API (modernc.org/sqlite/lib, checked with the module's
// version in heap_test.go).

var heapState struct {
	once  sync.Once
	err   error // why accounting could not be switched on
	mu    sync.Mutex
	limit int64 // the hard heap limit set so far (the largest asked for)
}

// enableHeapAccounting switches SQLite's memory statistics on, once per
// process. It fails when a connection opened before (outside sqldb).
func enableHeapAccounting() error {
	heapState.once.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		va := libc.Xmalloc(tls, 8)
		if va == 0 {
			heapState.err = fmt.Errorf("out of memory")
			return
		}
		defer libc.Xfree(tls, va)
		if rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MEMSTATUS, libc.VaList(va, int32(1))); rc != sqlite3.SQLITE_OK {
			heapState.err = fmt.Errorf("sqlite3_config(SQLITE_CONFIG_MEMSTATUS) returned %d: SQLite was initialized before sqldb's first template", rc)
		}
	})
	return heapState.err
}

// raiseHeapLimit sets SQLite's process-wide hard heap limit to n bytes
// unless a larger one is set already: allocations past it fail, and the
// statement that made them ends with SQLITE_NOMEM.
func raiseHeapLimit(n int64) {
	heapState.mu.Lock()
	defer heapState.mu.Unlock()
	if n <= heapState.limit {
		return
	}
	heapState.limit = n
	tls := libc.NewTLS()
	defer tls.Close()
	sqlite3.Xsqlite3_hard_heap_limit64(tls, n)
}

// setHeapLimit sets the hard heap limit to n whatever was set before
// (tests lower it; 0 removes it).
func setHeapLimit(n int64) {
	heapState.mu.Lock()
	defer heapState.mu.Unlock()
	heapState.limit = n
	tls := libc.NewTLS()
	defer tls.Close()
	sqlite3.Xsqlite3_hard_heap_limit64(tls, n)
}

// heapLimit is the process's hard heap limit for SQLite (0: none).
func heapLimit() int64 {
	heapState.mu.Lock()
	defer heapState.mu.Unlock()
	return heapState.limit
}

// heapUsed is the memory SQLite holds now, across the process (0 when
// accounting is off).
func heapUsed() int64 {
	tls := libc.NewTLS()
	defer tls.Close()
	return sqlite3.Xsqlite3_memory_used(tls)
}

// errStatementMemory ends a statement whose working memory grew past its
// bound (the cause of its context's cancellation).
var errStatementMemory = errors.New("statement memory limit")

// heapPoll is how often a running statement's memory is read.
const heapPoll = 2 * time.Millisecond

// watchHeap cancels a statement (cancel, with errStatementMemory as the
// cause) once SQLite's heap has grown by more than limit bytes since it
// started; the returned func stops watching. Statements shorter than one
// poll cost a timer and nothing else. The heap is the process's: another
// fork's statement growing at the same time counts too, so the bound is
// on a statement and everything that ran beside it, never looser.
func watchHeap(limit int64, cancel context.CancelCauseFunc) (stop func()) {
	start := heapUsed()
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	var poll func()
	poll = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if heapUsed()-start > limit {
			cancel(errStatementMemory)
			return
		}
		timer.Reset(heapPoll)
	}
	mu.Lock()
	timer = time.AfterFunc(heapPoll, poll)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		timer.Stop()
		mu.Unlock()
	}
}
