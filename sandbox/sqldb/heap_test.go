package sqldb

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// heapVersion is the modernc.org/sqlite version heap.go was written for:
// it reaches sqlite3_config, sqlite3_hard_heap_limit64 and
// sqlite3_memory_used through the module's lib package.
const heapVersion = "v1.62.0"

func TestHeapAccountingVersion(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build info")
	}
	for _, m := range bi.Deps {
		if m.Path == "modernc.org/sqlite" && m.Version != heapVersion {
			t.Errorf("modernc.org/sqlite is %s; heap.go was checked against %s: check that SQLITE_CONFIG_MEMSTATUS, the hard heap limit and sqlite3_memory_used still work as TestStatementMemoryBounded expects, then update heapVersion", m.Version, heapVersion)
		}
	}
}

// distinctGB asks for about a gigabyte of working memory in one
// statement: DISTINCT over 1,000 values of 1 MB (an ephemeral table in the
// memory temp store).
const distinctGB = `SELECT COUNT(*) FROM (SELECT DISTINCT zeroblob(1000000) || i FROM
  (WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 1000) SELECT i FROM r))`

// sortGB sorts the same gigabyte.
const sortGB = `SELECT COUNT(*) FROM (SELECT zeroblob(1000000) || i AS x FROM
  (WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 1000) SELECT i FROM r) ORDER BY x)`

// A statement's working memory (sorts, DISTINCT) is bounded by MaxMemory:
// it is refused long before its gigabyte, and the fork goes on.
func TestStatementMemoryBounded(t *testing.T) {
	if err := enableHeapAccounting(); err != nil {
		t.Fatal(err)
	}
	tpl := newTemplate(t, "", Options{StatementTimeout: time.Minute})
	db := fork(t, tpl)
	for _, sql := range []string{distinctGB, sortGB} {
		start := time.Now()
		_, err := db.Query(context.Background(), sql)
		var qe *QueryError
		if !errors.As(err, &qe) || qe.Kind != KindRefused || !strings.Contains(qe.Msg, "working memory") {
			t.Errorf("%.40s...: got %v, want a refusal for working memory", sql, err)
		}
		// At most a few hundred megabytes per second are written: a second
		// is several times the 32 MiB bound and far from the gigabyte.
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%.40s... ran %s before it was refused", sql, d)
		}
	}
	if got := scalar(t, db, "SELECT COUNT(*) FROM customers"); got != int64(36) {
		t.Errorf("after the refusals: customers = %v", got)
	}
	// A large statement's own text is its due, not working memory.
	query(t, db, "SELECT length('"+strings.Repeat("x", 8<<20)+"')")
}

// Every fork of the process together stays under the hard heap limit:
// sessions that each stay within their own bound cannot add up past it;
// their statements fail with a refusal and the process lives on.
func TestProcessMemoryBounded(t *testing.T) {
	if err := enableHeapAccounting(); err != nil {
		t.Fatal(err)
	}
	// Each statement may take a gigabyte: only the process bound stops it.
	tpl := newTemplate(t, "", Options{StatementTimeout: time.Minute, MaxMemory: 1 << 30})
	// Lower the process's limit for this test alone (it is process-wide).
	was := heapLimit()
	setHeapLimit(256 << 20)
	defer setHeapLimit(was)
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		db := fork(t, tpl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.Query(context.Background(), distinctGB)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var qe *QueryError
		if !errors.As(err, &qe) || qe.Kind != KindRefused || !strings.Contains(qe.Msg, "every sandbox of this process") {
			t.Errorf("session %d: got %v, want a refusal at the process's bound", i, err)
		}
	}
	if used := heapUsed(); used > 256<<20 {
		t.Errorf("SQLite holds %d MiB after the sessions, over the 256 MiB bound", used>>20)
	}
	db := fork(t, tpl)
	if got := scalar(t, db, "SELECT COUNT(*) FROM customers"); got != int64(36) {
		t.Errorf("a new fork after the refusals: customers = %v", got)
	}
}
