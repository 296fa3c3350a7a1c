package sqldb

import (
	"fmt"
	"strings"
)

// This file is the lexical half of the confinement: it splits SQL into
// statements and finds their keywords and identifiers the way the database's
// own tokenizer would (comments, quoted strings and identifiers, PostgreSQL's
// nested comments, E'' strings and dollar quotes), so that a keyword hidden
// in a comment or a string is neither missed nor mistaken. The other half is
// the database itself: SQLite's authorizer, PostgreSQL's role privileges.

type dialect int

const (
	dialectSQLite dialect = iota
	dialectPG
)

type tokKind int

const (
	tokWord         tokKind = iota // keyword or unquoted identifier (lower-cased)
	tokQuotedIdent                 // "ident", `ident`, [ident] (content, lower-cased)
	tokUnicodeIdent                // PostgreSQL U&"..."
	tokString
	tokNumber
	tokPunct
	tokSemicolon
)

type token struct {
	kind tokKind
	text string
}

// statement is the tokens of one statement (without its ';').
type statement []token

// lexSQL splits src into statements, dropping empty ones.
func lexSQL(src string, d dialect) ([]statement, error) {
	var (
		stmts []statement
		cur   statement
	)
	i, n := 0, len(src)
	for i < n {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < n && src[i+1] == '-':
			for i < n && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < n && src[i+1] == '*':
			j, err := skipBlockComment(src, i, d)
			if err != nil {
				return nil, err
			}
			i = j
		case c == ';':
			if d == dialectSQLite && inTrigger(cur) && !endsWithEnd(cur) {
				// Inside CREATE TRIGGER ... BEGIN ... END a ';' ends a body
				// statement, not the trigger; only "END;" does (SQLite's own
				// sqlite3_complete rule).
				cur = append(cur, token{tokPunct, ";"})
				i++
				continue
			}
			if len(cur) > 0 {
				stmts = append(stmts, cur)
				cur = nil
			}
			i++
		case c == '\'':
			j, err := skipQuoted(src, i, '\'', false)
			if err != nil {
				return nil, err
			}
			cur = append(cur, token{tokString, src[i:j]})
			i = j
		case c == '"':
			j, err := skipQuoted(src, i, '"', false)
			if err != nil {
				return nil, err
			}
			cur = append(cur, token{tokQuotedIdent, strings.ToLower(strings.ReplaceAll(src[i+1:j-1], `""`, `"`))})
			i = j
		case c == '`' && d == dialectSQLite:
			j, err := skipQuoted(src, i, '`', false)
			if err != nil {
				return nil, err
			}
			cur = append(cur, token{tokQuotedIdent, strings.ToLower(strings.ReplaceAll(src[i+1:j-1], "``", "`"))})
			i = j
		case c == '[' && d == dialectSQLite:
			j := strings.IndexByte(src[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unterminated [identifier]")
			}
			cur = append(cur, token{tokQuotedIdent, strings.ToLower(src[i+1 : i+j])})
			i += j + 1
		case c == '$' && d == dialectPG && i+1 < n && (src[i+1] == '$' || isIdentStart(src[i+1])):
			// $tag$ ... $tag$ dollar quote, or a $1 parameter.
			j := i + 1
			for j < n && isIdentChar(src[j]) && src[j] != '$' {
				j++
			}
			if j < n && src[j] == '$' {
				tag := src[i : j+1]
				end := strings.Index(src[j+1:], tag)
				if end < 0 {
					return nil, fmt.Errorf("unterminated dollar-quoted string %s", tag)
				}
				stop := j + 1 + end + len(tag)
				cur = append(cur, token{tokString, src[i:stop]})
				i = stop
			} else {
				cur = append(cur, token{tokPunct, "$"})
				i++
			}
		case isIdentStart(c):
			j := i
			for j < n && isIdentChar(src[j]) {
				j++
			}
			word := strings.ToLower(src[i:j])
			// Prefixed literals: E'..' (backslash escapes), B'', X'', N'', U&'..', U&"..".
			if j < n && src[j] == '\'' && (word == "e" || word == "b" || word == "x" || word == "n") {
				k, err := skipQuoted(src, j, '\'', word == "e" && d == dialectPG)
				if err != nil {
					return nil, err
				}
				cur = append(cur, token{tokString, src[i:k]})
				i = k
				continue
			}
			if d == dialectPG && word == "u" && j+1 < n && src[j] == '&' && (src[j+1] == '\'' || src[j+1] == '"') {
				q := src[j+1]
				k, err := skipQuoted(src, j+1, q, false)
				if err != nil {
					return nil, err
				}
				kind := tokString
				if q == '"' {
					kind = tokUnicodeIdent
				}
				cur = append(cur, token{kind, src[i:k]})
				i = k
				continue
			}
			cur = append(cur, token{tokWord, word})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < n && (isIdentChar(src[j]) || src[j] == '.') {
				j++
			}
			cur = append(cur, token{tokNumber, src[i:j]})
			i = j
		default:
			cur = append(cur, token{tokPunct, string(c)})
			i++
		}
	}
	if len(cur) > 0 {
		stmts = append(stmts, cur)
	}
	return stmts, nil
}

// inTrigger reports whether the statement so far is a CREATE TRIGGER.
func inTrigger(cur statement) bool {
	if len(cur) < 2 || cur[0].kind != tokWord || cur[0].text != "create" {
		return false
	}
	for _, t := range cur[1:min(len(cur), 4)] {
		if t.kind == tokWord && t.text == "trigger" {
			return true
		}
	}
	return false
}

func endsWithEnd(cur statement) bool {
	last := cur[len(cur)-1]
	return last.kind == tokWord && last.text == "end"
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9') || c == '$'
}

// skipQuoted returns the index after the closing quote of the literal that
// starts at src[i] == q; a doubled quote is an escaped one, and with
// backslash a backslash escapes the next byte.
func skipQuoted(src string, i int, q byte, backslash bool) (int, error) {
	j := i + 1
	for j < len(src) {
		switch {
		case backslash && src[j] == '\\':
			j += 2
		case src[j] == q:
			if j+1 < len(src) && src[j+1] == q {
				j += 2
				continue
			}
			return j + 1, nil
		default:
			j++
		}
	}
	return 0, fmt.Errorf("unterminated quoted text starting %q", clip(src[i:], 20))
}

// skipBlockComment returns the index after the comment at src[i:]; in
// PostgreSQL block comments nest.
func skipBlockComment(src string, i int, d dialect) (int, error) {
	depth := 0
	j := i
	for j+1 < len(src) {
		switch {
		case src[j] == '/' && src[j+1] == '*':
			if depth == 0 || d == dialectPG {
				depth++
			}
			j += 2
		case src[j] == '*' && src[j+1] == '/':
			depth--
			j += 2
			if depth == 0 {
				return j, nil
			}
		default:
			j++
		}
	}
	if d == dialectSQLite {
		return len(src), nil // SQLite ends an unterminated comment at the end of input
	}
	return 0, fmt.Errorf("unterminated /* comment")
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// firstWord returns the statement's leading keyword, skipping opening
// parentheses; "" when it does not start with a word.
func (s statement) firstWord() string {
	for _, t := range s {
		if t.kind == tokPunct && t.text == "(" {
			continue
		}
		if t.kind == tokWord {
			return t.text
		}
		return ""
	}
	return ""
}

// singleStatement lexes src and requires exactly one statement.
func singleStatement(src string, d dialect) (statement, *QueryError) {
	stmts, err := lexSQL(src, d)
	if err != nil {
		return nil, &QueryError{Kind: KindSQL, Msg: "SQL error: " + err.Error()}
	}
	switch len(stmts) {
	case 0:
		return nil, refused("empty SQL: send one SQL statement")
	case 1:
		return stmts[0], nil
	default:
		return nil, refused("%d statements in one call: send exactly one SQL statement per query_database call", len(stmts))
	}
}
