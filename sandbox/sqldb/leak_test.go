package sqldb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mcprl/mcprl/internal/pgtest"
)

// cycles runs n fork/query/close cycles, some of them timing out, failing,
// refused or cancelled by the caller.
func cycles(t *testing.T, tpl *Template, n int, slow string) (timeouts, failures int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		db, err := tpl.Fork(ctx)
		if err != nil {
			t.Fatalf("cycle %d: fork: %v", i, err)
		}
		var qe *QueryError
		switch {
		case i%100 == 99: // the per-call limit
			if _, err := db.Query(ctx, slow); !errors.As(err, &qe) || qe.Kind != KindTimeout {
				t.Fatalf("cycle %d: want timeout, got %v", i, err)
			}
			timeouts++
		case i%250 == 124: // the caller gives up mid-query
			cctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(20*time.Millisecond, cancel)
			if _, err := db.Query(cctx, slow); err == nil || errors.As(err, &qe) {
				t.Fatalf("cycle %d: want the caller's cancellation, got %v", i, err)
			}
			cancel()
			failures++
		case i%250 == 61: // the caller's deadline comes before the statement's
			cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			// PostgreSQL: if the server's answer comes later than the
			// deadline's grace (a loaded machine), the connection is cut
			// and the fork replaced (KindLost, a timeout too).
			if _, err := db.Query(cctx, slow); !errors.As(err, &qe) || qe.Kind != KindTimeout && qe.Kind != KindLost {
				t.Fatalf("cycle %d: want a timeout at the caller's deadline, got %v", i, err)
			}
			cancel()
			timeouts++
		case i%7 == 3:
			if _, err := db.Query(ctx, "SELECT no_such_column FROM customers"); !errors.As(err, &qe) {
				t.Fatalf("cycle %d: want SQL error, got %v", i, err)
			}
			failures++
		case i%13 == 5:
			if _, err := db.Query(ctx, "SELECT 1; SELECT 2"); !errors.As(err, &qe) {
				t.Fatalf("cycle %d: want refusal, got %v", i, err)
			}
			failures++
		default:
			res, err := db.Query(ctx, fmt.Sprintf("DELETE FROM orders WHERE id <= %d", i%40+1))
			if err != nil || res.RowsAffected != int64(i%40+1) {
				t.Fatalf("cycle %d: delete: %v %v", i, res, err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatalf("cycle %d: close: %v", i, err)
		}
	}
	return timeouts, failures
}

// settle waits for goroutines to wind down to the baseline.
func settle(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > baseline {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines left over the baseline %d:\n%s", g-baseline, baseline, buf[:runtime.Stack(buf, true)])
	}
}

func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(entries)
}

func TestSQLiteNoLeak(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("SQLITE_TMPDIR", tmp)
	t.Setenv("TMPDIR", tmp)
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)
	schema, data := fixtureSQL(t)
	tpl, err := NewTemplate(context.Background(), schema, data, Options{StatementTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	timeouts, failures := cycles(t, tpl, 1000, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c")
	// A fork left open is closed with its template.
	if _, err := tpl.Fork(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tpl.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("1000 cycles: %d timeouts, %d failures", timeouts, failures)
	settle(t, baseG)
	if fd := openFDs(t); fd > baseFD {
		t.Errorf("%d file descriptors left open", fd-baseFD)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
	if _, err := tpl.Fork(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("fork after close: %v", err)
	}
}

func TestPostgresNoLeak(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	admin, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	count := func(sql string) int {
		res, err := admin.Exec(ctx, sql).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		fmt.Sscan(string(res[0].Rows[0][0]), &n)
		return n
	}
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)
	schema, data := fixtureSQL(t)
	tpl, err := NewTemplate(ctx, schema, data, Options{DSN: dsn, StatementTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pt := tpl.be.(*pgTemplate)
	app, prefix := pt.AppName(), pt.SchemaPrefix()
	start := time.Now()
	timeouts, failures := cycles(t, tpl, 1000, "SELECT pg_sleep(5)")
	t.Logf("1000 cycles in %s: %d timeouts, %d failures", time.Since(start).Round(time.Millisecond), timeouts, failures)
	if n := count("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + app + "'"); n > pgMaxIdle {
		t.Errorf("%d connections open between forks (at most %d idle)", n, pgMaxIdle)
	}
	if _, err := tpl.Fork(ctx); err != nil { // left open: Close must end it
		t.Fatal(err)
	}
	if err := tpl.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var conns int
	for {
		conns = count("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + app + "'")
		if conns == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if conns != 0 {
		t.Errorf("%d server connections left", conns)
	}
	if n := count("SELECT count(*) FROM pg_namespace WHERE nspname LIKE '" + prefix + "%'"); n != 0 {
		t.Errorf("%d slot schemas left", n)
	}
	if n := count("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '" + app + "'"); n != 0 {
		t.Errorf("%d locks left", n)
	}
	settle(t, baseG)
	if fd := openFDs(t); fd > baseFD {
		t.Errorf("%d file descriptors left open", fd-baseFD)
	}
}

// TestPostgresSweepsStaleSlots: slot schemas of a template whose process
// died (no live connection with its application_name) are dropped by the
// next template; a live template's slots are kept.
func TestPostgresSweepsStaleSlots(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	admin, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	const stale = "mcprl_0123456789ab_s0"
	if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+stale+" CASCADE; CREATE SCHEMA "+stale+"; CREATE TABLE "+stale+".t (a int)").ReadAll(); err != nil {
		t.Fatal(err)
	}
	live := newTemplate(t, dsn, Options{})
	newTemplate(t, dsn, Options{})
	res, err := admin.Exec(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = '"+stale+"'").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if string(res[0].Rows[0][0]) != "0" {
		t.Errorf("stale slot schema %s was not dropped", stale)
	}
	// The first template's slot survived the second's sweep.
	db := fork(t, live)
	if got := scalar(t, db, "SELECT COUNT(*) FROM customers"); got != int64(36) {
		t.Errorf("live template's slot: %v", got)
	}
}

// TestPostgresIdleConnectionKilled: a pooled connection that the server
// ended between forks is replaced transparently.
func TestPostgresIdleConnectionKilled(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	tpl := newTemplate(t, dsn, Options{})
	db := fork(t, tpl)
	pid := db.fc.(*pgFork).c.PID()
	db.Close()
	admin, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid)).ReadAll(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	db = fork(t, tpl)
	if got := scalar(t, db, "SELECT COUNT(*) FROM orders"); got != int64(40) {
		t.Errorf("after the idle connection was killed: %v", got)
	}
	if db.fc.(*pgFork).c.PID() == pid {
		t.Error("the killed connection was reused")
	}
}
