package sqldb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcprl/mcprl/internal/pgtest"
)

// fixtureSQL reads the example fixture the package is built for.
func fixtureSQL(t testing.TB) (schema, data string) {
	t.Helper()
	dir := filepath.Join("..", "..", "examples", "fixtures", "customers")
	s, err := os.ReadFile(filepath.Join(dir, "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.ReadFile(filepath.Join(dir, "data.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return string(s), string(d)
}

func newTemplate(t testing.TB, dsn string, opts Options) *Template {
	t.Helper()
	schema, data := fixtureSQL(t)
	opts.DSN = dsn
	tpl, err := NewTemplate(context.Background(), schema, data, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tpl.Close(); err != nil {
			t.Errorf("close template: %v", err)
		}
	})
	return tpl
}

// eachBackend runs f against embedded SQLite and the test PostgreSQL.
func eachBackend(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, "") })
	t.Run("postgres", func(t *testing.T) { f(t, pgtest.DSN(t)) })
}

func fork(t testing.TB, tpl *Template) *DB {
	t.Helper()
	db, err := tpl.Fork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func query(t testing.TB, db *DB, sql string) *Result {
	t.Helper()
	res, err := db.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res
}

// scalar runs a one-cell query and returns the cell.
func scalar(t testing.TB, db *DB, sql string) any {
	t.Helper()
	res := query(t, db, sql)
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		t.Fatalf("%s: want one cell, got %v", sql, res.Rows)
	}
	return res.Rows[0][0]
}

func TestQueryResults(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		db := fork(t, newTemplate(t, dsn, Options{}))
		// The fixture's documented counts (data.sql header).
		for sql, want := range map[string]int64{
			"SELECT COUNT(*) FROM customers WHERE status = 'inactive'":              7,
			"SELECT COUNT(*) FROM customers WHERE LOWER(TRIM(status)) = 'inactive'": 13,
			"SELECT COUNT(*) FROM customers WHERE status IS NULL":                   3,
			"SELECT COUNT(*) FROM orders":                                           40,
		} {
			if got := scalar(t, db, sql); got != want {
				t.Errorf("%s = %v (%T), want %d", sql, got, got, want)
			}
		}
		res := query(t, db, "SELECT customers.id, full_name, status, is_active, total FROM customers JOIN orders ON orders.customer_id = customers.id WHERE customers.status IS NULL ORDER BY orders.id LIMIT 1")
		if got := strings.Join(res.Columns, ","); got != "id,full_name,status,is_active,total" {
			t.Errorf("columns %s", got)
		}
		row := res.Rows[0]
		if _, ok := row[0].(int64); !ok {
			t.Errorf("id %T, want int64", row[0])
		}
		if _, ok := row[1].(string); !ok {
			t.Errorf("full_name %T, want string", row[1])
		}
		if row[2] != nil {
			t.Errorf("status %v, want nil", row[2])
		}
		if _, ok := row[3].(bool); !ok {
			t.Errorf("is_active %T, want bool", row[3])
		}
		if _, ok := row[4].(float64); !ok {
			t.Errorf("total %T, want float64", row[4])
		}
		text := res.Text()
		if !strings.Contains(text, "full_name") || !strings.Contains(text, "NULL") || !strings.Contains(text, "(1 row)") {
			t.Errorf("text:\n%s", text)
		}
		upd := query(t, db, "UPDATE customers SET status = 'inactive' WHERE status = 'Inactive'")
		if upd.RowsAffected != 2 || len(upd.Columns) != 0 || !strings.Contains(upd.Text(), "2 row(s) affected") {
			t.Errorf("update: %+v %q", upd, upd.Text())
		}
		sel := query(t, db, "SELECT id FROM customers WHERE id < 3")
		if sel.RowsAffected != 0 {
			t.Errorf("select rows_affected %d", sel.RowsAffected)
		}
		// SQL errors are QueryErrors the model can read.
		for _, bad := range []string{"SELECT nope FROM customers", "SELEC 1", "INSERT INTO orders (id, customer_id, total, placed_at) VALUES (999, 12345, 1, '2025-01-01')"} {
			_, err := db.Query(context.Background(), bad)
			var qe *QueryError
			if !errors.As(err, &qe) || qe.Kind != KindSQL || !strings.HasPrefix(qe.Error(), "SQL error: ") {
				t.Errorf("%s: got %v, want a SQL QueryError", bad, err)
			}
		}
		// The fork still works after errors.
		if got := scalar(t, db, "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"); got != int64(9) {
			t.Errorf("after errors: %v", got)
		}
	})
}

// TestForkIsolation: 8 forks change the data concurrently; each sees only
// its own changes, and a later fork sees the pristine data.
func TestForkIsolation(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		tpl := newTemplate(t, dsn, Options{})
		const n = 8
		ctx := context.Background()
		// Pristine counts per residue class, from a fork closed before the others start.
		var customersMod, ordersMod [n]int64
		first, err := tpl.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			customersMod[i] = scalar(t, first, fmt.Sprintf("SELECT COUNT(*) FROM customers WHERE id %% %d = %d", n, i)).(int64)
			ordersMod[i] = scalar(t, first, fmt.Sprintf("SELECT COUNT(*) FROM orders WHERE customer_id %% %d = %d", n, i)).(int64)
		}
		first.Close()
		var (
			wrote, checked sync.WaitGroup
			errs           = make(chan error, n)
		)
		wrote.Add(n)
		checked.Add(n)
		for i := 0; i < n; i++ {
			go func() {
				defer checked.Done()
				err := func() error {
					db, err := tpl.Fork(ctx)
					if err != nil {
						wrote.Done()
						return err
					}
					defer db.Close()
					steps := []string{
						fmt.Sprintf("DELETE FROM orders WHERE customer_id %% %d = %d", n, i),
						fmt.Sprintf("UPDATE customers SET status = 'fork-%d' WHERE id %% %d = %d", i, n, i),
						fmt.Sprintf("INSERT INTO customers (id, email, full_name, created_at) VALUES (%d, 'f%d@x', 'F', '2025-01-01')", 1000+i, i),
					}
					for _, s := range steps {
						if _, err := db.Query(ctx, s); err != nil {
							wrote.Done()
							return fmt.Errorf("fork %d: %s: %w", i, s, err)
						}
					}
					wrote.Done()
					wrote.Wait() // every fork has written before any checks
					want := map[string]any{
						"SELECT COUNT(*) FROM customers WHERE status LIKE 'fork-%'":                    customersMod[i],
						fmt.Sprintf("SELECT COUNT(*) FROM customers WHERE status = 'fork-%d'", i):      customersMod[i],
						"SELECT COUNT(*) FROM customers WHERE id >= 1000":                              int64(1),
						fmt.Sprintf("SELECT COUNT(*) FROM customers WHERE id = %d", 1000+i):            int64(1),
						fmt.Sprintf("SELECT COUNT(*) FROM orders WHERE customer_id %% %d = %d", n, i):  int64(0),
						fmt.Sprintf("SELECT COUNT(*) FROM orders WHERE customer_id %% %d <> %d", n, i): 40 - ordersMod[i],
					}
					for q, w := range want {
						res, err := db.Query(ctx, q)
						if err != nil {
							return fmt.Errorf("fork %d: %s: %w", i, q, err)
						}
						if got := res.Rows[0][0]; got != w {
							return fmt.Errorf("fork %d: %s = %v, want %v", i, q, got, w)
						}
						// The oracle sees the same state.
						ores, err := db.Oracle(ctx, q)
						if err != nil || ores.Rows[0][0] != w {
							return fmt.Errorf("fork %d: oracle %s = %v (%v), want %v", i, q, ores, err, w)
						}
					}
					return nil
				}()
				if err != nil {
					errs <- err
				}
			}()
		}
		checked.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// A new fork sees the pristine data.
		db := fork(t, tpl)
		if got := scalar(t, db, "SELECT COUNT(*) FROM customers WHERE status LIKE 'fork-%' OR id >= 1000"); got != int64(0) {
			t.Errorf("new fork sees %v changed rows", got)
		}
		if got := scalar(t, db, "SELECT COUNT(*) FROM orders"); got != int64(40) {
			t.Errorf("new fork sees %v orders, want 40", got)
		}
	})
}

func TestTimeoutAndCaps(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		tpl := newTemplate(t, dsn, Options{StatementTimeout: 300 * time.Millisecond, MaxRows: 5, MaxBytes: 200})
		db := fork(t, tpl)
		ctx := context.Background()
		slow := "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
		start := time.Now()
		_, err := db.Query(ctx, slow)
		var qe *QueryError
		if !errors.As(err, &qe) || qe.Kind != KindTimeout || !strings.Contains(qe.Error(), "timed out") {
			t.Fatalf("endless query: got %v, want a timeout QueryError", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("timeout took %s", d)
		}
		// The fork goes on after a timeout, with its earlier changes.
		query(t, db, "DELETE FROM orders WHERE id = 1")
		if _, err := db.Query(ctx, slow); !errors.As(err, &qe) {
			t.Fatalf("second timeout: %v", err)
		}
		if got := scalar(t, db, "SELECT COUNT(*) FROM orders"); got != int64(39) {
			t.Errorf("after timeout: %v orders, want 39", got)
		}
		// Row cap.
		res := query(t, db, "SELECT id FROM customers ORDER BY id")
		if !res.Truncated || len(res.Rows) != 5 || !strings.Contains(res.Text(), "truncated") || !strings.Contains(res.Text(), "more than 5 rows") {
			t.Errorf("row cap: truncated=%v rows=%d\n%s", res.Truncated, len(res.Rows), res.Text())
		}
		// Byte cap.
		res = query(t, db, "SELECT email, full_name, email AS e2 FROM customers ORDER BY id")
		if !res.Truncated || len(res.Rows) >= 5 || !strings.Contains(res.Text(), "more than 200 bytes") {
			t.Errorf("byte cap: truncated=%v rows=%d\n%s", res.Truncated, len(res.Rows), res.Text())
		}
		// Exactly at the cap is not truncated.
		res = query(t, db, "SELECT id FROM customers ORDER BY id LIMIT 5")
		if res.Truncated {
			t.Errorf("5 rows under a 5-row cap marked truncated")
		}
		// A caller's own cancellation is not a QueryError.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := db.Query(cctx, "SELECT 1"); err == nil || errors.As(err, &qe) {
			t.Errorf("cancelled context: got %v, want a plain error", err)
		}
	})
}

func TestOracleAndTables(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		db := fork(t, newTemplate(t, dsn, Options{}))
		ctx := context.Background()
		query(t, db, "UPDATE customers SET status = 'inactive' WHERE LOWER(TRIM(status)) = 'inactive'")
		res, err := db.Oracle(ctx, "SELECT COUNT(*) FROM customers WHERE status = 'inactive'")
		if err != nil || res.Rows[0][0] != int64(13) {
			t.Fatalf("oracle after update: %v %v", res, err)
		}
		// The oracle cannot change the fork.
		if _, err := db.Oracle(ctx, "DELETE FROM orders"); dsn == "" && err == nil {
			t.Errorf("sqlite oracle DELETE was allowed")
		}
		if got := scalar(t, db, "SELECT COUNT(*) FROM orders"); got != int64(40) {
			t.Errorf("after oracle DELETE: %v orders", got)
		}
		tabs, err := db.Tables(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, tb := range tabs {
			for _, c := range tb.Columns {
				got[tb.Name] = append(got[tb.Name], c.Name)
			}
		}
		want := map[string]string{
			"customers": "id,email,full_name,status,account_status,is_active,country,created_at,last_login_at",
			"orders":    "id,customer_id,total,placed_at,state",
		}
		if len(got) != len(want) {
			t.Errorf("tables %v", got)
		}
		for name, cols := range want {
			if strings.Join(got[name], ",") != cols {
				t.Errorf("%s columns %v, want %s", name, got[name], cols)
			}
		}
		id := tabs[0].Columns[0]
		if tabs[0].Name != "customers" || !id.PrimaryKey || !id.NotNull || tabs[0].Columns[3].NotNull {
			t.Errorf("customers columns: %+v", tabs[0].Columns)
		}
	})
}

func TestBadFixtureSQL(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		for _, c := range []struct{ schema, data, where string }{
			{"CREATE TABLE t (a INTEGER", "", "schema.sql"},
			{"CREATE TABLE t (a INTEGER);", "INSERT INTO nope VALUES (1);", "data.sql"},
		} {
			tpl, err := NewTemplate(ctx, c.schema, c.data, Options{DSN: dsn})
			if err == nil {
				tpl.Close()
				t.Errorf("%q / %q: built", c.schema, c.data)
				continue
			}
			if !strings.Contains(err.Error(), c.where) {
				t.Errorf("error %q does not name %s", err, c.where)
			}
		}
		if _, err := NewTemplate(ctx, "CREATE TABLE t (a INTEGER);", "", Options{DSN: "mysql://x"}); err == nil {
			t.Error("unsupported DSN accepted")
		}
	})
}

// TestPostgresSequences: sequences are not transactional in PostgreSQL, so
// each fork resets its slot's sequences to the template's state: every
// fork's first insert gets the same id.
func TestPostgresSequences(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	tpl, err := NewTemplate(ctx, "CREATE TABLE notes (id SERIAL PRIMARY KEY, body TEXT); CREATE SEQUENCE tickets START 100;",
		"INSERT INTO notes (body) VALUES ('a'), ('b');", Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer tpl.Close()
	for i := 0; i < 3; i++ {
		db := fork(t, tpl)
		res := query(t, db, "INSERT INTO notes (body) VALUES ('c') RETURNING id")
		if res.Rows[0][0] != int64(3) || res.RowsAffected != 1 {
			t.Errorf("fork %d: new id %v (affected %d), want 3", i, res.Rows[0][0], res.RowsAffected)
		}
		if got := scalar(t, db, "SELECT nextval('tickets')"); got != int64(100) {
			t.Errorf("fork %d: nextval %v, want 100", i, got)
		}
		db.Close()
	}
}

// The template's Oracle and Variants read the fixture as it was built,
// whatever a fork did; Writes counts the fork's statements that changed
// its data or schema.
func TestTemplateOracleIsPristine(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		tpl := newTemplate(t, dsn, Options{})
		db := fork(t, tpl)
		ctx := context.Background()
		query(t, db, "SELECT COUNT(*) FROM customers")
		query(t, db, "UPDATE customers SET status = 'x' WHERE id = -1") // no row changed
		if n := db.Writes(); n != 0 {
			t.Errorf("after reads and an UPDATE of no row: Writes = %d, want 0", n)
		}
		query(t, db, "DELETE FROM orders")
		query(t, db, "DELETE FROM customers")
		query(t, db, "CREATE INDEX customers_email_idx2 ON customers (email)")
		if n := db.Writes(); n != 3 {
			t.Errorf("Writes = %d, want 3 (two DELETEs and a CREATE INDEX)", n)
		}
		if got := scalar(t, db, "SELECT COUNT(*) FROM customers"); got != int64(0) {
			t.Fatalf("the fork: customers = %v, want 0", got)
		}
		for range 2 { // the second answer comes from the cache
			res, err := tpl.Oracle(ctx, "SELECT COUNT(*) FROM customers")
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Rows[0][0]; got != int64(36) {
				t.Errorf("the template's oracle: customers = %v, want 36", got)
			}
		}
		vs, err := tpl.Variants(ctx, 3, "SELECT COUNT(*) FROM customers", []string{"SELECT COUNT(*) FROM customers"})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vs {
			n, _ := v[0].Rows[0][0].(int64)
			if n == 0 || n >= 36 || v[1] == nil || v[1].Rows[0][0] != v[0].Rows[0][0] {
				t.Errorf("variant %d of the fixture: oracle %v, query %v; want the same count, between 1 and 35", i, v[0].Rows, v[1])
			}
		}
		// The template's reference forks are not forks of a trajectory.
		if n := tpl.OpenForks(); n != 1 {
			t.Errorf("OpenForks = %d, want 1", n)
		}
	})
}

// A fork of a fork starts from its parent's state as it is, and the two
// are isolated both ways from then on.
func TestForkOfFork(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		tpl := newTemplate(t, dsn, Options{})
		parent := fork(t, tpl)
		query(t, parent, "UPDATE customers SET status = 'inactive' WHERE LOWER(TRIM(status)) = 'inactive'")
		query(t, parent, "DELETE FROM orders WHERE total > 100")
		query(t, parent, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
		query(t, parent, "INSERT INTO notes (id, body) VALUES (1, 'parent')")
		want := map[string]any{
			"SELECT COUNT(*) FROM customers WHERE status = 'inactive'": scalar(t, parent, "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"),
			"SELECT COUNT(*) FROM orders":                              scalar(t, parent, "SELECT COUNT(*) FROM orders"),
			"SELECT body FROM notes WHERE id = 1":                      "parent",
		}
		child, err := parent.Fork(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { child.Close() })
		for q, w := range want {
			if got := scalar(t, child, q); got != w {
				t.Errorf("the child: %s = %v, want the parent's %v", q, got, w)
			}
		}
		if child.Writes() != parent.Writes() {
			t.Errorf("the child's Writes %d, want the parent's %d", child.Writes(), parent.Writes())
		}
		// Child to parent: the child's changes stay in the child.
		query(t, child, "DELETE FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)")
		query(t, child, "UPDATE notes SET body = 'child'")
		if got := scalar(t, parent, "SELECT body FROM notes WHERE id = 1"); got != "parent" {
			t.Errorf("the parent sees the child's write: %v", got)
		}
		if got := scalar(t, parent, "SELECT COUNT(*) FROM customers"); got != int64(36) {
			t.Errorf("the parent sees the child's DELETE: customers = %v", got)
		}
		// Parent to child: the parent's later changes stay in the parent.
		query(t, parent, "INSERT INTO notes (id, body) VALUES (2, 'later')")
		if got := scalar(t, child, "SELECT COUNT(*) FROM notes"); got != int64(1) {
			t.Errorf("the child sees the parent's later INSERT: notes = %v", got)
		}
		// A fork of the child (a grandchild) holds the child's state.
		grand, err := child.Fork(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { grand.Close() })
		if got := scalar(t, grand, "SELECT body FROM notes WHERE id = 1"); got != "child" {
			t.Errorf("the grandchild: body = %v, want child", got)
		}
		// The fixture is untouched.
		res, err := tpl.Oracle(context.Background(), "SELECT COUNT(*) FROM orders")
		if err != nil || res.Rows[0][0] != int64(40) {
			t.Errorf("the fixture's orders: %v, %v", res, err)
		}
		if n := tpl.OpenForks(); n != 3 {
			t.Errorf("OpenForks = %d, want 3", n)
		}
	})
}
