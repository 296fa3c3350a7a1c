package sqldb

import (
	"testing"
)

func TestCheckPGIdentifiers(t *testing.T) {
	for _, ok := range []string{
		"SELECT status FROM customers WHERE note = 'set_config'",
		"SELECT 1 -- pg_read_file\n",
		"SELECT $$lo_import$$",
		"SELECT lower(status), COUNT(*) FROM customers GROUP BY 1",
		"EXPLAIN SELECT * FROM orders",
		"WITH d AS (DELETE FROM orders RETURNING id) SELECT COUNT(*) FROM d",
		"SELEC 1", // not a statement: the server reports the syntax error
	} {
		if qe := checkPG(ok); qe != nil {
			t.Errorf("%q refused: %v", ok, qe)
		}
	}
}
