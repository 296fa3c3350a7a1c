package sqldb

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A Snapshot holds its parent's state as a Fork does, isolated every way
// (parent, snapshot, forks of it, siblings), and on PostgreSQL takes no
// slot schema and no connection until it is used: snapshots that pile up
// cost no slots, and after Close every slot is free and no connection is
// left beyond the template's idle ones.
func TestSnapshot(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		tpl := newTemplate(t, dsn, Options{})
		pg, _ := tpl.be.(*pgTemplate)
		slots := func() (built, inUse int) {
			if pg == nil {
				return 0, 0
			}
			pg.mu.Lock()
			defer pg.mu.Unlock()
			return len(pg.slots), len(pg.slots) - len(pg.free)
		}
		wantInUse := func(when string, want int) {
			t.Helper()
			if _, inUse := slots(); pg != nil && inUse != want {
				t.Errorf("%s: %d slots in use, want %d", when, inUse, want)
			}
		}
		parent := fork(t, tpl)
		query(t, parent, "DELETE FROM orders WHERE total > 100")
		query(t, parent, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
		query(t, parent, "INSERT INTO notes (id, body) VALUES (1, 'parent')")
		orders := scalar(t, parent, "SELECT COUNT(*) FROM orders")
		built0, _ := slots()

		snaps := make([]*DB, 20)
		for i := range snaps {
			s, err := parent.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			snaps[i] = s
		}
		if built, _ := slots(); built != built0 {
			t.Errorf("20 snapshots built %d slots", built-built0)
		}
		wantInUse("20 snapshots and their parent", 1)
		if n := snaps[0].Writes(); n != 3 {
			t.Errorf("a snapshot's Writes = %d, want its parent's 3", n)
		}

		// Parent to snapshot: the parent's later writes stay in the parent.
		query(t, parent, "UPDATE notes SET body = 'later'")
		// Forks of a snapshot (resets from an episode's fork) hold its state;
		// one's writes reach neither a sibling, the snapshot nor the parent.
		a, err := snaps[0].Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		b, err := snaps[0].Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		wantInUse("two forks of a snapshot", 3)
		query(t, a, "UPDATE notes SET body = 'a'")
		query(t, a, "DELETE FROM orders")
		for _, c := range []struct {
			name string
			db   *DB
			body string
		}{{"the parent", parent, "later"}, {"a sibling", b, "parent"}, {"the snapshot", snaps[0], "parent"}, {"another snapshot", snaps[1], "parent"}} {
			if got := scalar(t, c.db, "SELECT body FROM notes WHERE id = 1"); got != c.body {
				t.Errorf("%s: body = %v, want %v", c.name, got, c.body)
			}
			if got := scalar(t, c.db, "SELECT COUNT(*) FROM orders"); got != orders {
				t.Errorf("%s: orders = %v, want %v", c.name, got, orders)
			}
		}
		wantInUse("two snapshots used", 5)
		// The snapshot, now used, to its forks: its own writes stay in it.
		query(t, snaps[0], "UPDATE notes SET body = 'snapshot'")
		if got := scalar(t, b, "SELECT body FROM notes WHERE id = 1"); got != "parent" {
			t.Errorf("a fork sees its snapshot's later write: %v", got)
		}
		// A snapshot of an unused snapshot is parked too, and holds its state.
		ss, err := snaps[2].Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		wantInUse("a snapshot of a snapshot", 5)
		if got := scalar(t, ss, "SELECT body FROM notes WHERE id = 1"); got != "parent" {
			t.Errorf("a snapshot of a snapshot: body = %v, want parent", got)
		}

		for _, db := range append(snaps, parent, a, b, ss) {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if n := tpl.OpenForks(); n != 0 {
			t.Errorf("OpenForks = %d after closing all", n)
		}
		wantInUse("all closed", 0)
		if pg == nil {
			return
		}
		if built, _ := slots(); built > built0+5 {
			t.Errorf("%d slots built for 6 forks in use at most", built)
		}
		c, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		res, err := c.Exec(ctx, "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = '"+pg.AppName()+"'").ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		pg.mu.Lock()
		idle := len(pg.idle)
		pg.mu.Unlock()
		if got, want := string(res[0].Rows[0][0]), strconv.Itoa(1+idle); got != want {
			t.Errorf("%s connections of the template after closing all, want %s (the anchor and %d idle)", got, want, idle)
		}
	})
}
