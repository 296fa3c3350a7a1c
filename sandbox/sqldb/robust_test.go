package sqldb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcprl/mcprl/internal/pgtest"
)

// slowSQL runs until it is stopped, on each backend.
func slowSQL(dsn string) string {
	if dsn == "" {
		return "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
	}
	return "SELECT pg_sleep(60)"
}

// A caller's deadline shorter than the statement timeout (the sandbox's
// call timeout) ends the statement in time, and the fork goes on with its
// earlier changes.
func TestCallerDeadlineMidQuery(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		tpl := newTemplate(t, dsn, Options{StatementTimeout: 10 * time.Second})
		db := fork(t, tpl)
		query(t, db, "DELETE FROM orders WHERE id = 1")
		// The first deadline is checked to 10% (a 2 s one, so that a shared
		// machine's scheduling delays stay inside it); the second shows the
		// fork goes on after the first.
		for i, limit := range []time.Duration{2 * time.Second, 300 * time.Millisecond} {
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			start := time.Now()
			_, err := db.Query(ctx, slowSQL(dsn))
			took := time.Since(start)
			cancel()
			var qe *QueryError
			if !errors.As(err, &qe) || qe.Kind != KindTimeout {
				t.Fatalf("call %d: got %v, want a timeout QueryError", i, err)
			}
			if i == 0 && took > limit+limit/10 {
				t.Errorf("call %d: a %s deadline returned after %s (more than 10%% late)", i, limit, took)
			}
		}
		if got := scalar(t, db, "SELECT COUNT(*) FROM orders"); got != int64(39) {
			t.Errorf("after deadlines: %v orders, want 39 (the fork's own DELETE kept)", got)
		}
		if err := db.Lost(); err != nil {
			t.Errorf("Lost() = %v after clean timeouts", err)
		}
	})
}

// A fork whose connection dies is replaced: the call that found it dead
// gets a QueryError saying so, later calls work on a fresh copy of the
// fixture, and Lost reports why.
func TestPostgresLostConnectionReplaced(t *testing.T) {
	dsn := pgtest.DSN(t)
	tpl := newTemplate(t, dsn, Options{})
	db := fork(t, tpl)
	ctx := context.Background()
	query(t, db, "DELETE FROM orders WHERE id = 1")
	pid := scalar(t, db, "SELECT pg_backend_pid()")
	admin, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid)).ReadAll(); err != nil {
		t.Fatal(err)
	}
	_, err = db.Query(ctx, "SELECT COUNT(*) FROM orders")
	var qe *QueryError
	if !errors.As(err, &qe) || qe.Kind != KindLost || !strings.Contains(qe.Error(), "initial state") {
		t.Fatalf("query on a killed connection: got %v, want a KindLost QueryError", err)
	}
	if db.Lost() == nil {
		t.Errorf("Lost() = nil after the connection died")
	}
	if got := scalar(t, db, "SELECT COUNT(*) FROM orders"); got != int64(40) {
		t.Errorf("replacement fork: %v orders, want the fixture's 40", got)
	}
	if got := scalar(t, db, "SELECT pg_backend_pid()"); got == pid {
		t.Errorf("replacement fork runs on the dead backend %v", pid)
	}
}

// A caller's cancellation in the middle of a statement may cost the
// connection; the next call still works.
func TestPostgresCancelMidQueryRecovers(t *testing.T) {
	dsn := pgtest.DSN(t)
	tpl := newTemplate(t, dsn, Options{})
	db := fork(t, tpl)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := db.Query(ctx, "SELECT pg_sleep(60)"); err == nil {
		t.Fatal("cancelled pg_sleep returned no error")
	}
	// The next call either runs on the same connection or reports the
	// replacement; the one after that runs.
	if _, err := db.Query(context.Background(), "SELECT 1"); err != nil {
		var qe *QueryError
		if !errors.As(err, &qe) || qe.Kind != KindLost {
			t.Fatalf("after a cancel: %v", err)
		}
	}
	query(t, db, "SELECT 1")
}

// bigInsert is the attack of the memory checks: 1,000 rows of 1 MB each.
const bigInsert = "CREATE TABLE big AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) SELECT x, zeroblob(1000000) AS b FROM c"

const pgBigInsert = "CREATE TABLE big AS SELECT x, repeat('x', 1000000) AS b FROM generate_series(1, 1000) AS x"

// pgBigSort sorts more than work_mem allows in memory, so it spills to
// temporary files.
const pgBigSort = "SELECT COUNT(*) FROM (SELECT md5(x::text) AS m FROM generate_series(1, 3000000) AS x ORDER BY m) AS s"

// A fork's database cannot grow past Options.MaxMemory: the statement is
// refused with a message that names the limit, in time, and the fork goes on.
func TestMemoryCap(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		tpl := newTemplate(t, "", Options{StatementTimeout: 2 * time.Second, MaxMemory: 8 << 20})
		db := fork(t, tpl)
		start := time.Now()
		_, err := db.Query(context.Background(), bigInsert)
		var qe *QueryError
		if !errors.As(err, &qe) || qe.Kind != KindRefused || !strings.Contains(qe.Error(), "8 MiB") {
			t.Fatalf("1 GB insert: got %v, want a refusal naming the 8 MiB limit", err)
		}
		if d := time.Since(start); d > 2200*time.Millisecond {
			t.Errorf("refusal took %s against a 2s limit", d)
		}
		if _, err := db.Query(context.Background(), "SELECT COUNT(*) FROM big"); err == nil {
			t.Errorf("the refused CREATE TABLE left a table")
		}
		// Below the cap, writes work.
		query(t, db, "CREATE TABLE small AS SELECT zeroblob(1000000) AS b FROM customers LIMIT 4")
	})
	t.Run("postgres", func(t *testing.T) {
		tpl := newTemplate(t, pgtest.DSN(t), Options{StatementTimeout: 20 * time.Second, MaxMemory: 8 << 20})
		db := fork(t, tpl)
		if got := scalar(t, db, "SHOW work_mem"); got != "2MB" {
			t.Errorf("work_mem = %v, want 2MB (a quarter of MaxMemory)", got)
		}
		limit := scalar(t, db, "SHOW temp_file_limit")
		if limit != "8MB" {
			t.Skipf("temp_file_limit = %v: the DSN's user may not set it (scripts/test-setup.sh grants it)", limit)
		}
		_, err := db.Query(context.Background(), pgBigSort)
		var qe *QueryError
		if !errors.As(err, &qe) || qe.Kind != KindRefused || !strings.Contains(qe.Error(), "8 MiB") {
			t.Fatalf("big sort: got %v, want a refusal naming the 8 MiB limit", err)
		}
		query(t, db, "SELECT 1")
	})
}

// TestMemoryUnderLoad runs 16 one-gigabyte inserts at once, each in its own
// fork, and checks that the process's peak resident memory stays under
// 1 GiB and comes back down when the forks close. MCPRL_LONG_TESTS=1 runs
// 4 rounds of them; the default is one.
func TestMemoryUnderLoad(t *testing.T) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	tpl := newTemplate(t, "", Options{StatementTimeout: 2 * time.Second})
	rounds := 1
	if os.Getenv("MCPRL_LONG_TESTS") != "" {
		rounds = 4
	}
	for r := range rounds {
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				db, err := tpl.Fork(context.Background())
				if err != nil {
					errs[i] = err
					return
				}
				defer db.Close()
				start := time.Now()
				_, err = db.Query(context.Background(), bigInsert)
				// Refused at the memory cap, or (on a loaded machine) at the
				// time limit first.
				var qe *QueryError
				if !errors.As(err, &qe) || qe.Kind != KindRefused && qe.Kind != KindTimeout {
					errs[i] = fmt.Errorf("fork %d: got %v, want a refusal or a timeout", i, err)
				} else if d := time.Since(start); d > 4*time.Second {
					// 16 CPU-bound statements on a few shared cores finish
					// late by the time the others keep the CPU; the
					// single-statement 10% bound is TestCallerDeadlineMidQuery's.
					errs[i] = fmt.Errorf("fork %d: took %s against a 2s limit", i, d)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Errorf("round %d: %v", r, err)
			}
		}
	}
	peak := procStatusKiB(t, "VmHWM")
	t.Logf("peak RSS %d MiB over %d rounds of 16 concurrent 1 GB inserts", peak>>10, rounds)
	if peak > 1<<20 {
		t.Errorf("peak RSS %d MiB, want under 1 GiB", peak>>10)
	}
	// The forks are closed: their memory goes back to the system (SQLite's
	// pages are freed to the OS at once; Go's heap when collected).
	debug.FreeOSMemory()
	rss := procStatusKiB(t, "VmRSS")
	t.Logf("RSS %d MiB after the forks closed", rss>>10)
	if rss > peak/2 {
		t.Errorf("RSS %d MiB after the forks closed, want under half the peak (%d MiB)", rss>>10, peak>>10)
	}
}

// procStatusKiB reads a kB field of /proc/self/status.
func procStatusKiB(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// Column names count towards MaxBytes, and a long one (SQLite names an
// expression's column by its text) is clipped.
func TestMaxBytesCountsColumnNames(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		tpl := newTemplate(t, dsn, Options{MaxBytes: 65536})
		db := fork(t, tpl)
		lit := "'" + strings.Repeat("x", 10<<20) + "'"
		res := query(t, db, "SELECT "+lit+", 1")
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 65536+1024 || len(res.Text()) > 65536+1024 {
			t.Errorf("a 10 MB literal under a 64 KiB cap came back as %d bytes of JSON and %d of text", len(b), len(res.Text()))
		}
		if !res.Truncated {
			t.Errorf("the 10 MB value was not cut")
		}
		// Many columns whose names alone pass the cap (PostgreSQL clips names
		// to 63 bytes itself): the rows are cut.
		var cols []string
		for i := range 1100 {
			cols = append(cols, fmt.Sprintf("1 AS %s%d", strings.Repeat("c", 250), i))
		}
		res = query(t, db, "SELECT "+strings.Join(cols, ", "))
		if !res.Truncated || len(res.Rows) != 0 || !strings.Contains(res.Text(), "column names") {
			t.Errorf("1,100 long names under a 64 KiB cap: truncated=%v rows=%d", res.Truncated, len(res.Rows))
		}
	})
}
