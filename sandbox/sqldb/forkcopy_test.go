package sqldb

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A SQLite fork of a fork (and a snapshot) is made by SQLite's online
// backup into a new connection, not from a serialized image: it must be
// confined exactly as a fork of the template is. Every escape is refused,
// values are bounded, foreign keys are enforced, the oracle is read-only,
// its growth is capped by MaxMemory, and it copies nothing into the Go
// heap.
func TestSQLiteForkOfForkConfined(t *testing.T) {
	dir := t.TempDir()
	tpl := newTemplate(t, "", Options{StatementTimeout: 2 * time.Second, MaxMemory: 8 << 20})
	ctx := context.Background()
	parent := fork(t, tpl)
	query(t, parent, "DELETE FROM orders WHERE total > 100")
	child, err := parent.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Close() })
	snap, err := child.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	for _, c := range []struct {
		name string
		db   *DB
	}{{"fork of a fork", child}, {"snapshot of a fork of a fork", snap}} {
		t.Run(c.name, func(t *testing.T) {
			db := c.db
			for _, e := range sqliteEscapes(dir) {
				if _, err := db.Query(ctx, e.sql); !isRefusal(err, e.want) {
					t.Errorf("%s: got %v, want a refusal containing %q", e.sql, err, e.want)
				}
			}
			var qe *QueryError
			if _, err := db.Query(ctx, "SELECT length(zeroblob(1000000000))"); !errors.As(err, &qe) || qe.Kind != KindSQL || !strings.Contains(err.Error(), "too big") {
				t.Errorf("zeroblob(1e9): got %v", err)
			}
			if _, err := db.Query(ctx, "INSERT INTO orders (id, customer_id, total, placed_at) VALUES (901, 999, 1, '2025-01-01')"); !errors.As(err, &qe) || qe.Kind != KindSQL || !strings.Contains(err.Error(), "FOREIGN KEY") {
				t.Errorf("an order of no customer: got %v, want a FOREIGN KEY error", err)
			}
			if _, err := db.Oracle(ctx, "DELETE FROM customers"); err == nil || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("a write from the oracle: %v", err)
			}
			if _, err := db.Query(ctx, bigInsert); !errors.As(err, &qe) || qe.Kind != KindRefused || !strings.Contains(qe.Error(), "8 MiB") {
				t.Errorf("1 GB insert: got %v, want a refusal naming the 8 MiB limit", err)
			}
			if got := scalar(t, db, "SELECT COUNT(*) FROM orders WHERE total > 100"); got != int64(0) {
				t.Errorf("the parent's DELETE is not in the copy: %v orders over 100", got)
			}
			query(t, db, "CREATE TABLE small AS SELECT zeroblob(1000000) AS b FROM customers LIMIT 4")
		})
	}
	// Isolated both ways: the snapshot, taken before the fork of a fork
	// made its table small, could make its own; the parent sees neither.
	if _, err := parent.Query(ctx, "SELECT COUNT(*) FROM small"); err == nil {
		t.Errorf("the parent sees a table its copies made")
	}

	// The copy is made in SQLite's heap: a fork of a fork allocates a few
	// kilobytes of Go heap whatever the database's size (a 4 MB one here),
	// and gives SQLite's memory back when closed.
	query(t, parent, "CREATE TABLE pad AS SELECT zeroblob(1000000) AS b FROM customers LIMIT 4")
	forkClose := func() {
		db, err := parent.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	forkClose()
	before := heapUsed()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range 20 {
		forkClose()
	}
	runtime.ReadMemStats(&m1)
	if b := (m1.TotalAlloc - m0.TotalAlloc) / 20; b > 64<<10 {
		t.Errorf("%d bytes of Go heap allocated per fork of a fork of a 4 MB database", b)
	}
	if after := heapUsed(); after-before > 1<<20 {
		t.Errorf("SQLite's heap grew by %d bytes over 20 forks of a fork, all closed", after-before)
	}
}

// The backup copies a database whose page size is not the default one.
func TestSQLiteForkOfForkPageSize(t *testing.T) {
	tpl, err := NewTemplate(context.Background(), "PRAGMA page_size = 1024; CREATE TABLE t (x INTEGER PRIMARY KEY, b BLOB);",
		"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50) INSERT INTO t SELECT x, zeroblob(3000) FROM c;", Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tpl.Close() })
	// The page size is the image's header bytes 16-17, big-endian.
	if img := tpl.be.(*sqliteTemplate).image; len(img) < 100 || int(img[16])<<8|int(img[17]) != 1024 {
		t.Fatalf("the template's page size is not 1024")
	}
	parent := fork(t, tpl)
	query(t, parent, "DELETE FROM t WHERE x > 40")
	child, err := parent.Fork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	if got := scalar(t, child, "SELECT COUNT(*) FROM t"); got != int64(40) {
		t.Errorf("the child: %v rows, want 40", got)
	}
	if got := scalar(t, child, "PRAGMA integrity_check"); got != "ok" {
		t.Errorf("integrity_check: %v", got)
	}
}
