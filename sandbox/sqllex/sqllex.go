package sqllex

import (
	"fmt"
	"strings"
)

// Dialect is the SQL dialect whose lexical rules apply.
type Dialect int

// The dialects.
const (
	SQLite Dialect = iota
	PostgreSQL
)

// Kind is a token's kind.
type Kind int

// The token kinds.
const (
	Word         Kind = iota // keyword or unquoted identifier (Text lower-cased)
	QuotedIdent              // "ident", `ident`, [ident] (Text: the content, lower-cased)
	UnicodeIdent             // PostgreSQL U&"..."
	String
	Number
	Punct
)

// Token is one token of a statement.
type Token struct {
	Kind Kind
	Text string
	Off  int // byte offset in the source
}

// Statement is the tokens of one statement, without its ';'. Start is the
// byte offset of its first token, End that of its ';' (or the end of the
// source).
type Statement struct {
	Tokens     []Token
	Start, End int
}

// Options choose how Split reads.
type Options struct {
	Dialect Dialect
	// Lenient ends an unterminated quoted text or comment at the end of the
	// source instead of failing (a linter reads what it can of a file).
	Lenient bool
}

// Split splits src into statements, dropping empty ones (only comments or
// whitespace). It fails on unterminated quoted text or comments unless
// Lenient.
func Split(src string, o Options) ([]Statement, error) {
	var (
		stmts []Statement
		cur   Statement
	)
	d := o.Dialect
	add := func(k Kind, text string, off int) {
		if len(cur.Tokens) == 0 {
			cur.Start = off
		}
		cur.Tokens = append(cur.Tokens, Token{k, text, off})
	}
	quoted := func(i int, q byte, backslash bool) (int, error) {
		j, err := skipQuoted(src, i, q, backslash)
		if err != nil && o.Lenient {
			return len(src), nil
		}
		return j, err
	}
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
				if !o.Lenient {
					return nil, err
				}
				j = n
			}
			i = j
		case c == ';':
			if d == SQLite && inTrigger(cur.Tokens) && !endsWithEnd(cur.Tokens) {
				// Inside CREATE TRIGGER ... BEGIN ... END a ';' ends a body
				// statement, not the trigger; only "END;" does (SQLite's own
				// sqlite3_complete rule).
				add(Punct, ";", i)
				i++
				continue
			}
			if len(cur.Tokens) > 0 {
				cur.End = i
				stmts = append(stmts, cur)
				cur = Statement{}
			}
			i++
		case c == '\'':
			j, err := quoted(i, '\'', false)
			if err != nil {
				return nil, err
			}
			add(String, src[i:j], i)
			i = j
		case c == '"':
			j, err := quoted(i, '"', false)
			if err != nil {
				return nil, err
			}
			add(QuotedIdent, strings.ToLower(strings.ReplaceAll(src[i+1:max(j-1, i+1)], `""`, `"`)), i)
			i = j
		case c == '`' && d == SQLite:
			j, err := quoted(i, '`', false)
			if err != nil {
				return nil, err
			}
			add(QuotedIdent, strings.ToLower(strings.ReplaceAll(src[i+1:max(j-1, i+1)], "``", "`")), i)
			i = j
		case c == '[' && d == SQLite:
			j := strings.IndexByte(src[i:], ']')
			if j < 0 {
				if !o.Lenient {
					return nil, fmt.Errorf("unterminated [identifier]")
				}
				j = n - i - 1
			}
			add(QuotedIdent, strings.ToLower(src[i+1:min(i+j, n)]), i)
			i += j + 1
		case c == '$' && d == PostgreSQL && i+1 < n && (src[i+1] == '$' || isIdentStart(src[i+1])):
			// $tag$ ... $tag$ dollar quote, or a $1 parameter.
			j := i + 1
			for j < n && isIdentChar(src[j]) && src[j] != '$' {
				j++
			}
			if j < n && src[j] == '$' {
				tag := src[i : j+1]
				end := strings.Index(src[j+1:], tag)
				stop := j + 1 + end + len(tag)
				if end < 0 {
					if !o.Lenient {
						return nil, fmt.Errorf("unterminated dollar-quoted string %s", tag)
					}
					stop = n
				}
				add(String, src[i:stop], i)
				i = stop
			} else {
				add(Punct, "$", i)
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
				k, err := quoted(j, '\'', word == "e" && d == PostgreSQL)
				if err != nil {
					return nil, err
				}
				add(String, src[i:k], i)
				i = k
				continue
			}
			if d == PostgreSQL && word == "u" && j+1 < n && src[j] == '&' && (src[j+1] == '\'' || src[j+1] == '"') {
				q := src[j+1]
				k, err := quoted(j+1, q, false)
				if err != nil {
					return nil, err
				}
				kind := String
				if q == '"' {
					kind = UnicodeIdent
				}
				add(kind, src[i:k], i)
				i = k
				continue
			}
			add(Word, word, i)
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < n && (isIdentChar(src[j]) || src[j] == '.') {
				j++
			}
			add(Number, src[i:j], i)
			i = j
		default:
			add(Punct, string(c), i)
			i++
		}
	}
	if len(cur.Tokens) > 0 {
		cur.End = n
		stmts = append(stmts, cur)
	}
	return stmts, nil
}

// FirstWord returns the statement's leading keyword (lower-cased), skipping
// opening parentheses; "" when it does not start with a word.
func (s Statement) FirstWord() string {
	for _, t := range s.Tokens {
		if t.Kind == Punct && t.Text == "(" {
			continue
		}
		if t.Kind == Word {
			return t.Text
		}
		return ""
	}
	return ""
}

// inTrigger reports whether the statement so far is a CREATE TRIGGER.
func inTrigger(cur []Token) bool {
	if len(cur) < 2 || cur[0].Kind != Word || cur[0].Text != "create" {
		return false
	}
	for _, t := range cur[1:min(len(cur), 4)] {
		if t.Kind == Word && t.Text == "trigger" {
			return true
		}
	}
	return false
}

func endsWithEnd(cur []Token) bool {
	last := cur[len(cur)-1]
	return last.Kind == Word && last.Text == "end"
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
	start := src[i:]
	if len(start) > 20 {
		start = start[:20] + "…"
	}
	return 0, fmt.Errorf("unterminated quoted text starting %q", start)
}

// skipBlockComment returns the index after the comment at src[i:]; in
// PostgreSQL block comments nest.
func skipBlockComment(src string, i int, d Dialect) (int, error) {
	depth := 0
	j := i
	for j+1 < len(src) {
		switch {
		case src[j] == '/' && src[j+1] == '*':
			if depth == 0 || d == PostgreSQL {
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
	if d == SQLite {
		return len(src), nil // SQLite ends an unterminated comment at the end of input
	}
	return 0, fmt.Errorf("unterminated /* comment")
}
