// Package sqllex splits SQL text into statements and tokens the way the
// database's own tokenizer would: comments, quoted strings and identifiers,
// SQLite's backquoted and bracketed identifiers and CREATE TRIGGER bodies,
// PostgreSQL's nested comments, E” strings, U& literals and dollar quotes.
// A keyword hidden in a comment or a string is neither missed nor
// mistaken. It is the one SQL lexer of mcprl: the sandbox's query guard
// (sandbox/sqldb), the SQL linter (sandbox/lint) and the reward's test of
// whether an assertion is a query (reward.IsSQL) all read SQL through it.
package sqllex
