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
