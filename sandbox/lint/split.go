package lint

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// statement is one SQL statement of a file and the line it starts on.
type statement struct {
	Text string // without the terminating semicolon
	Line int    // 1-based line of its first significant character
	Col  int    // 1-based column (in characters) of that character
	Off  int    // byte offset of that character in the file
}

// splitSQL splits src into statements at top-level semicolons. It knows
// quoted strings and identifiers (”, "", “, []), line and block comments,
// PostgreSQL dollar quoting, and the BEGIN ... END body of a SQLite trigger.
// Statements holding only comments are dropped.
func splitSQL(src string) []statement {
	var out []statement
	line := 1
	start, startLine := -1, 0 // first significant byte of the current statement
	var lastWord string       // last bare word seen in the current statement
	trigger, inBody := false, false
	words := 0
	flush := func(end int) {
		if start >= 0 {
			lineStart := strings.LastIndexByte(src[:start], '\n') + 1
			col := utf8.RuneCountInString(src[lineStart:start]) + 1
			out = append(out, statement{Text: strings.TrimSpace(src[start:end]), Line: startLine, Col: col, Off: start})
		}
		start, lastWord, trigger, inBody, words = -1, "", false, false, 0
	}
	mark := func(i int) {
		if start < 0 {
			start, startLine = i, line
		}
	}
	// skipTo advances past the first occurrence of end after i, counting lines.
	skipTo := func(i int, end string) int {
		j := strings.Index(src[i:], end)
		stop := len(src)
		if j >= 0 {
			stop = i + j + len(end)
		}
		line += strings.Count(src[i:stop], "\n")
		return stop
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case c == '-' && strings.HasPrefix(src[i:], "--"):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				i = len(src)
			} else {
				i += j // the newline itself is counted above
			}
		case c == '/' && strings.HasPrefix(src[i:], "/*"):
			i = skipTo(i+2, "*/")
		case c == '\'' || c == '"' || c == '`':
			mark(i)
			i = skipQuoted(src, i, c, &line)
		case c == '[':
			mark(i)
			i = skipTo(i+1, "]")
		case c == '$':
			mark(i)
			if tag, ok := dollarTag(src[i:]); ok {
				i = skipTo(i+len(tag), tag)
			} else {
				i++
			}
		case c == ';':
			if trigger && inBody && !strings.EqualFold(lastWord, "END") {
				i++ // a statement inside a trigger body
				lastWord = ""
				continue
			}
			flush(i)
			i++
		case isWordByte(c):
			mark(i)
			j := i
			for j < len(src) && isWordByte(src[j]) {
				j++
			}
			w := src[i:j]
			words++
			if words <= 4 && strings.EqualFold(w, "TRIGGER") {
				trigger = true
			}
			if trigger && strings.EqualFold(w, "BEGIN") {
				inBody = true
			}
			lastWord = w
			i = j
		default:
			mark(i)
			lastWord = ""
			i++
		}
	}
	flush(len(src))
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 0x80 || unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c))
}

// skipQuoted returns the index after the quoted token starting at i; a
// doubled quote character is an escaped quote.
func skipQuoted(src string, i int, q byte, line *int) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\n':
			*line++
		case q:
			if j+1 < len(src) && src[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(src)
}

// dollarTag reports the PostgreSQL dollar-quote tag ($$ or $name$) s starts with.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		c := s[j]
		if c == '$' {
			return s[:j+1], true
		}
		if !(c == '_' || unicode.IsLetter(rune(c)) || (j > 1 && unicode.IsDigit(rune(c)))) {
			return "", false
		}
	}
	return "", false
}
