package sqllex

import (
	"strings"
	"testing"
)

// TestSplit: statements and first words as each dialect reads them; unterminated
// quoted text and comments fail.
func TestSplit(t *testing.T) {
	cases := []struct {
		src   string
		d     Dialect
		count int
		first string
	}{
		{"SELECT 1", PostgreSQL, 1, "select"},
		{"select 1;;  ; -- c\n", PostgreSQL, 1, "select"},
		{"SELECT ';' ; SELECT 2", PostgreSQL, 2, "select"},
		{"SELECT 'it''s; fine'", PostgreSQL, 1, "select"},
		{`SELECT E'\'; COMMIT; --'`, PostgreSQL, 1, "select"},
		{`SELECT '\'; COMMIT; --'`, PostgreSQL, 2, "select"}, // standard strings: backslash is no escape
		{"SELECT $$ ; $$, $a$ $$ ; $a$", PostgreSQL, 1, "select"},
		{"SELECT $1", PostgreSQL, 1, "select"},
		{"/* a /* b */ ; */ COMMIT", PostgreSQL, 1, "commit"},
		{"/* a /* b */ SELECT 1; */ COMMIT", SQLite, 2, "select"}, // SQLite comments do not nest
		{`SELECT "a;b" FROM t`, PostgreSQL, 1, "select"},
		{"SELECT [a;b], `c;d` FROM t", SQLite, 1, "select"},
		{"((SELECT 1))", PostgreSQL, 1, "select"},
		{"CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END; SELECT 3", SQLite, 2, "create"},
		{"  \n -- only a comment", PostgreSQL, 0, ""},
	}
	for _, c := range cases {
		stmts, err := Split(c.src, Options{Dialect: c.d})
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if len(stmts) != c.count {
			t.Errorf("%q: %d statements, want %d", c.src, len(stmts), c.count)
			continue
		}
		if c.count > 0 && c.first != "" && stmts[0].FirstWord() != c.first {
			t.Errorf("%q: first word %q, want %q", c.src, stmts[0].FirstWord(), c.first)
		}
	}
	for _, bad := range []string{"SELECT 'open", `SELECT "open`, "SELECT $x$ open", "/* open"} {
		if _, err := Split(bad, Options{Dialect: PostgreSQL}); err == nil || !strings.Contains(err.Error(), "unterminated") {
			t.Errorf("%q: got %v, want unterminated", bad, err)
		}
	}
}

// TestLenient: a lenient Split reads an unterminated literal or comment to
// the end, and statements keep their byte spans.
func TestLenient(t *testing.T) {
	src := "SELECT 1; /* c */ SELECT 'open"
	if _, err := Split(src, Options{}); err == nil {
		t.Fatal("strict: want an error")
	}
	stmts, err := Split(src, Options{Lenient: true})
	if err != nil || len(stmts) != 2 {
		t.Fatalf("lenient: %v, %d statements", err, len(stmts))
	}
	if got := src[stmts[0].Start:stmts[0].End]; got != "SELECT 1" {
		t.Errorf("first statement %q", got)
	}
	if got := src[stmts[1].Start:stmts[1].End]; got != "SELECT 'open" {
		t.Errorf("second statement %q", got)
	}
}
