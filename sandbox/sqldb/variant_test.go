package sqldb

import (
	"context"
	"fmt"
	"testing"
)

// TestVariants: on the customers fixture two filters that count the same
// number of rows live ('pending' and 'suspended' both count 2) count
// differently on some variant, an equivalent rewrite never does, the
// policy's confinement still refuses what it refuses, and the fork's data
// is whole afterwards, inside the agent's own changes.
func TestVariants(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := fork(t, newTemplate(t, dsn, Options{}))
		// The agent's own change, which the variants must see and keep.
		query(t, db, "UPDATE customers SET full_name = 'Renamed' WHERE id = 1")
		count := func(status string) any {
			return scalar(t, db, fmt.Sprintf("SELECT COUNT(*) FROM customers WHERE status = '%s'", status))
		}
		pending, suspended := count("pending"), count("suspended")
		if pending != suspended {
			t.Fatalf("the fixture changed: pending %v, suspended %v (the test needs two equal counts)", pending, suspended)
		}
		rows := scalar(t, db, "SELECT COUNT(*) FROM customers")
		oracle := "SELECT COUNT(*) FROM customers WHERE status = 'pending'"
		queries := []string{
			"SELECT COUNT(*) FROM customers WHERE status = 'suspended'",         // a coincidence
			"SELECT COUNT(id) FROM customers WHERE 'pending' = status",          // the same question
			"SELECT COUNT(*) FROM nowhere",                                      // an SQL error
			"DELETE FROM customers",                                             // a write: refused read-only
			"SELECT COUNT(*) FROM customers WHERE status = 'pending'; SELECT 1", // two statements: refused
		}
		vs, err := db.Variants(ctx, 4, oracle, queries)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != 4 {
			t.Fatalf("%d variants, want 4", len(vs))
		}
		differs, thinned := false, false
		for i, v := range vs {
			if v[0] == nil || v[1] == nil || v[2] == nil {
				t.Fatalf("variant %d: a query that runs live failed: %v", i, v)
			}
			for j := 3; j < len(v); j++ {
				if v[j] != nil {
					t.Errorf("variant %d: %q ran: %v", i, queries[j-1], v[j].Rows)
				}
			}
			o, coincidence, same := fmt.Sprint(v[0].Rows), fmt.Sprint(v[1].Rows), fmt.Sprint(v[2].Rows)
			if same != o {
				t.Errorf("variant %d: the equivalent query gave %s, the oracle %s", i, same, o)
			}
			differs = differs || coincidence != o
			thinned = thinned || o != fmt.Sprintf("[[%v]]", pending)
		}
		if !differs {
			t.Error("no variant told 'suspended' from 'pending'")
		}
		if !thinned {
			t.Error("no variant changed the oracle's count: the rows were not thinned")
		}
		if got := scalar(t, db, "SELECT COUNT(*) FROM customers"); got != rows {
			t.Errorf("after the variants the fork has %v customers, want %v", got, rows)
		}
		if got := scalar(t, db, "SELECT full_name FROM customers WHERE id = 1"); got != "Renamed" {
			t.Errorf("after the variants customer 1 is named %v, want the agent's change", got)
		}
	})
}

// TestWitnessed: no customer is in Japan, so the oracle's answer is empty
// and any query that returns nothing (a filter on the wrong column, a
// constant) agrees with it live and on every thinned variant. On the
// witnessed copy, where setup moved one customer to Japan, the oracle has a
// row, the same question asked another way still agrees and the others do
// not; the policy's confinement still holds, the fork and the template keep
// their data, and a setup statement that fails is skipped.
func TestWitnessed(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		tpl := newTemplate(t, dsn, Options{})
		db := fork(t, tpl)
		query(t, db, "UPDATE customers SET full_name = 'Renamed' WHERE id = 1")
		oracle := "SELECT id FROM customers WHERE country = 'JP'"
		setup := []string{"UPDATE customers SET country = 'JP' WHERE id = (SELECT MIN(id) FROM customers WHERE country = 'FR')"}
		queries := []string{
			"SELECT id FROM customers WHERE 'JP' = country ORDER BY id", // the same question
			"SELECT id FROM customers WHERE full_name = 'JP'",           // the wrong column: empty live too
			"SELECT 1 WHERE 1 = 0",                                      // a constant: empty live too
			"DELETE FROM customers",                                     // a write: refused read-only
		}
		for _, q := range queries[:3] {
			if n := len(query(t, db, q).Rows); n != 0 {
				t.Fatalf("%s returns %d rows live; the test needs every query empty", q, n)
			}
		}
		vs, err := db.Variants(ctx, 3, oracle, queries[1:3])
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vs {
			if v[0] == nil || len(v[0].Rows) != 0 || v[1] == nil || len(v[1].Rows) != 0 || v[2] == nil || len(v[2].Rows) != 0 {
				t.Fatalf("thinned variant %d: want every result empty (removing rows cannot tell these apart): %v", i, v)
			}
		}
		frID := scalar(t, db, "SELECT MIN(id) FROM customers WHERE country = 'FR'")
		for name, run := range map[string]func() ([]*Result, error){
			"fork":     func() ([]*Result, error) { return db.Witnessed(ctx, setup, oracle, queries) },
			"template": func() ([]*Result, error) { return tpl.Witnessed(ctx, setup, oracle, queries) },
		} {
			w, err := run()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if w[0] == nil || fmt.Sprint(w[0].Rows) != fmt.Sprintf("[[%v]]", frID) {
				t.Fatalf("%s: the witnessed oracle gave %v, want customer %v", name, w[0], frID)
			}
			if w[1] == nil || fmt.Sprint(w[1].Rows) != fmt.Sprint(w[0].Rows) {
				t.Errorf("%s: the same question gave %v, the oracle %v", name, w[1], w[0].Rows)
			}
			for j := 2; j <= 3; j++ {
				if w[j] == nil || len(w[j].Rows) != 0 {
					t.Errorf("%s: %q gave %v, want no rows", name, queries[j-1], w[j])
				}
			}
			if w[4] != nil {
				t.Errorf("%s: %q ran: %v", name, queries[3], w[4].Rows)
			}
		}
		if got := scalar(t, db, "SELECT COUNT(*) FROM customers WHERE country = 'JP'"); fmt.Sprint(got) != "0" {
			t.Errorf("after the witnessed variant the fork has %v customers in Japan, want 0", got)
		}
		if got := scalar(t, db, "SELECT full_name FROM customers WHERE id = 1"); got != "Renamed" {
			t.Errorf("after the witnessed variant customer 1 is named %v, want the agent's change", got)
		}
		if res, err := tpl.Oracle(ctx, "SELECT COUNT(*) FROM customers WHERE country = 'JP'"); err != nil || fmt.Sprint(res.Rows) != "[[0]]" {
			t.Errorf("after the witnessed variant the template has %v customers in Japan (%v), want 0", res, err)
		}
		bad := "UPDATE nowhere SET x = 1"
		for name, run := range map[string]func([]string) ([]*Result, error){
			"fork":     func(s []string) ([]*Result, error) { return db.Witnessed(ctx, s, oracle, queries) },
			"template": func(s []string) ([]*Result, error) { return tpl.Witnessed(ctx, s, oracle, queries) },
		} {
			if w, err := run([]string{bad}); err != nil || w[0] == nil || len(w[0].Rows) != 0 {
				t.Errorf("%s, a failing setup statement alone: %v, %v; want the oracle's empty answer", name, w, err)
			}
			if w, err := run([]string{bad, setup[0]}); err != nil || w[0] == nil || len(w[0].Rows) != 1 {
				t.Errorf("%s, a failing setup statement before a good one: %v, %v; want the good one's row", name, w, err)
			}
		}
		if got := scalar(t, db, "SELECT COUNT(*) FROM customers WHERE country = 'JP'"); fmt.Sprint(got) != "0" {
			t.Errorf("after the failed setups the fork has %v customers in Japan, want 0", got)
		}
		// The copy may break a foreign key (an orphaned order: deferred on
		// SQLite, dropped on PostgreSQL); the fork still enforces it, and
		// the policy still cannot defer it.
		orphan := []string{"ALTER TABLE orders DROP CONSTRAINT orders_customer_id_fkey", "UPDATE orders SET customer_id = -1 WHERE id = (SELECT MIN(id) FROM orders)"}
		if w, err := db.Witnessed(ctx, orphan, "SELECT COUNT(*) FROM orders WHERE customer_id = -1", nil); err != nil || w[0] == nil || fmt.Sprint(w[0].Rows) != "[[1]]" {
			t.Errorf("an orphaned order on the witnessed copy: %v, %v; want one", w, err)
		}
		for _, q := range []string{"UPDATE orders SET customer_id = -1 WHERE id = (SELECT MIN(id) FROM orders)", "PRAGMA defer_foreign_keys = ON"} {
			if _, err := db.Query(ctx, q); err == nil {
				t.Errorf("after the witnessed copy the policy's %q ran", q)
			}
		}
	})
}
