package sqldb

import (
	"strings"
	"testing"
)

func TestLexStatements(t *testing.T) {
	cases := []struct {
		src   string
		d     dialect
		count int
		first string
	}{
		{"SELECT 1", dialectPG, 1, "select"},
		{"select 1;;  ; -- c\n", dialectPG, 1, "select"},
		{"SELECT ';' ; SELECT 2", dialectPG, 2, "select"},
		{"SELECT 'it''s; fine'", dialectPG, 1, "select"},
		{`SELECT E'\'; COMMIT; --'`, dialectPG, 1, "select"},
		{`SELECT '\'; COMMIT; --'`, dialectPG, 2, "select"}, // standard strings: backslash is no escape
		{"SELECT $$ ; $$, $a$ $$ ; $a$", dialectPG, 1, "select"},
		{"SELECT $1", dialectPG, 1, "select"},
		{"/* a /* b */ ; */ COMMIT", dialectPG, 1, "commit"},
		{"/* a /* b */ SELECT 1; */ COMMIT", dialectSQLite, 2, "select"}, // SQLite comments do not nest
		{`SELECT "a;b" FROM t`, dialectPG, 1, "select"},
		{"SELECT [a;b], `c;d` FROM t", dialectSQLite, 1, "select"},
		{"((SELECT 1))", dialectPG, 1, "select"},
		{"CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END; SELECT 3", dialectSQLite, 2, "create"},
		{"  \n -- only a comment", dialectPG, 0, ""},
	}
	for _, c := range cases {
		stmts, err := lexSQL(c.src, c.d)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if len(stmts) != c.count {
			t.Errorf("%q: %d statements, want %d", c.src, len(stmts), c.count)
			continue
		}
		if c.count > 0 && c.first != "" && stmts[0].firstWord() != c.first {
			t.Errorf("%q: first word %q, want %q", c.src, stmts[0].firstWord(), c.first)
		}
	}
	for _, bad := range []string{"SELECT 'open", `SELECT "open`, "SELECT $x$ open", "/* open"} {
		if _, err := lexSQL(bad, dialectPG); err == nil || !strings.Contains(err.Error(), "unterminated") {
			t.Errorf("%q: got %v, want unterminated", bad, err)
		}
	}
}

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
