package sqldb

import (
	"github.com/mcprl/mcprl/sandbox/sqllex"
)

// This file is the lexical half of the confinement: it reads SQL through
// package sqllex, which finds statements, keywords and identifiers the way
// the database's own tokenizer would, so that a keyword hidden in a comment
// or a string is neither missed nor mistaken. The other half is the database
// itself: SQLite's authorizer, PostgreSQL's role privileges.

// statement is the tokens of one statement (without its ';').
type statement []sqllex.Token

// firstWord returns the statement's leading keyword, skipping opening
// parentheses; "" when it does not start with a word.
func (s statement) firstWord() string { return sqllex.Statement{Tokens: s}.FirstWord() }

// singleStatement lexes src and requires exactly one statement.
func singleStatement(src string, d sqllex.Dialect) (statement, *QueryError) {
	stmts, err := sqllex.Split(src, sqllex.Options{Dialect: d})
	if err != nil {
		return nil, &QueryError{Kind: KindSQL, Msg: "SQL error: " + err.Error()}
	}
	switch len(stmts) {
	case 0:
		return nil, refused("empty SQL: send one SQL statement")
	case 1:
		return stmts[0].Tokens, nil
	default:
		return nil, refused("%d statements in one call: send exactly one SQL statement per query_database call", len(stmts))
	}
}

// changesSchema reports whether src, a statement that ran, changed the
// schema or emptied a table without counting rows (TRUNCATE).
func changesSchema(src string, d sqllex.Dialect) bool {
	stmts, err := sqllex.Split(src, sqllex.Options{Dialect: d, Lenient: true})
	if err != nil || len(stmts) == 0 {
		return false
	}
	switch stmts[0].FirstWord() {
	case "create", "alter", "drop", "truncate":
		return true
	}
	return false
}

// clip shortens s to n bytes for a message.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
