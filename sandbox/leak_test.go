package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mcprl/mcprl/internal/pgtest"
	"github.com/mcprl/mcprl/task"
)

// openFDs counts this process's open file descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// stable returns the goroutine count once it stops falling.
func stable() int {
	n := runtime.NumGoroutine()
	for same := 0; same < 3; {
		time.Sleep(5 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m < n {
			same = 0
		} else {
			same++
		}
		n = min(n, m)
	}
	return n
}

// settle waits until the goroutine count is back to at most base.
func settle(base int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 200 && n > base; i++ {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// TestNoLeak runs fork/call/close cycles on concurrent workers, with calls
// that succeed, fail (bad SQL, unknown tool, bad arguments, refused paths)
// and time out, and checks that nothing is left: goroutines, file
// descriptors, child processes, open sandboxes.
func TestNoLeak(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testNoLeak(t, "", 1000) })
	t.Run("postgres", func(t *testing.T) {
		if testing.Short() {
			t.Skip("short")
		}
		testNoLeak(t, pgtest.DSN(t), 1000)
	})
}

func testNoLeak(t *testing.T, dsn string, cycles int) {
	ctx := context.Background()
	fx := loadCustomers(t)
	var f *Factory
	cycle := func(i int) error {
		s, err := f.Fork(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		var name, args string
		callCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		switch {
		case i%50 == 7: // times out: the call ends with an error, the statement is interrupted
			callCtx, cancel = context.WithTimeout(ctx, 2*time.Millisecond)
			defer cancel()
			name, args = task.ToolQueryDatabase, `{"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"}`
		case i%10 == 1:
			name, args = task.ToolQueryDatabase, `{"sql": "SELEC oops"}`
		case i%10 == 2:
			name, args = "no_such_tool", `{}`
		case i%10 == 3:
			name, args = task.ToolRunLinter, `{"path": "../../etc/passwd"}`
		case i%10 == 4:
			name, args = task.ToolQueryDatabase, `{"query": 1}`
		case i%10 == 5:
			name, args = task.ToolRunLinter, `{"path": "report.json"}`
		default:
			name, args = task.ToolQueryDatabase, fmt.Sprintf(`{"sql": "DELETE FROM orders WHERE customer_id = %d"}`, i%36+1)
		}
		res, err := s.Call(callCtx, name, json.RawMessage(args))
		if i%50 == 7 {
			if err == nil && !res.IsError {
				return fmt.Errorf("cycle %d: slow call finished: %s", i, ResultText(res))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("cycle %d: %s: %w", i, name, err)
		}
		if wantErr := i%10 >= 1 && i%10 <= 4; res.IsError != wantErr {
			return fmt.Errorf("cycle %d: %s %s: isError=%v: %s", i, name, args, res.IsError, ResultText(res))
		}
		return s.Close()
	}
	// Warm up once (a factory and a cycle) so that lazily started runtime
	// and driver goroutines are counted in the baseline.
	var err error
	if f, err = NewFactory(ctx, fx, Options{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	if err := cycle(0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	baseG, baseFD := stable(), openFDs(t)
	if f, err = NewFactory(ctx, fx, Options{DSN: dsn}); err != nil {
		t.Fatal(err)
	}

	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < cycles; i += workers {
				if err := cycle(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d fork/call/close cycles in %s (%s per cycle, %d workers)", cycles, time.Since(start), time.Since(start)/time.Duration(cycles), workers)

	f.mu.Lock()
	open := len(f.open)
	f.mu.Unlock()
	if open != 0 {
		t.Errorf("%d sandboxes still open", open)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Factory.Close: %v", err)
	}
	if g := settle(baseG); g > baseG {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before, %d after\n%s", baseG, g, buf[:runtime.Stack(buf, true)])
	}
	// Database connections are file descriptors too (PostgreSQL sockets).
	if fd := openFDs(t); fd > baseFD {
		t.Errorf("file descriptors: %d before, %d after", baseFD, fd)
	}
	if c := children(t); len(c) > 0 {
		t.Errorf("child processes: %v", c)
	}
}
