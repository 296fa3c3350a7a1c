package lint

import (
	"strings"
	"unicode/utf8"

	"github.com/mcprl/mcprl/sandbox/sqllex"
)

// statement is one SQL statement of a file and the line it starts on.
type statement struct {
	Text string // without the terminating semicolon
	Line int    // 1-based line of its first significant character
	Col  int    // 1-based column (in characters) of that character
	Off  int    // byte offset of that character in the file
}

// splitSQL splits src into statements as the database's dialect reads them
// (package sqllex, leniently: an unterminated quote or comment runs to the
// end of the file, whose statements the database then reports). Statements
// holding only comments are dropped.
func splitSQL(src string, d sqllex.Dialect) []statement {
	stmts, _ := sqllex.Split(src, sqllex.Options{Dialect: d, Lenient: true})
	out := make([]statement, 0, len(stmts))
	for _, s := range stmts {
		lineStart := strings.LastIndexByte(src[:s.Start], '\n') + 1
		out = append(out, statement{
			Text: strings.TrimSpace(src[s.Start:s.End]),
			Line: strings.Count(src[:s.Start], "\n") + 1,
			Col:  utf8.RuneCountInString(src[lineStart:s.Start]) + 1,
			Off:  s.Start,
		})
	}
	return out
}
