// Package look writes the look a careful engineer takes at a database
// around a query: before it, the values the column it filters on really
// takes, or a few rows of its table; after a query that failed or came
// back empty, what its setback says to check (the tables there are, the
// columns a table has, the values a column takes).
//
// It reads SQL the way this project's generated queries are written (FROM
// and WHERE followed by identifiers, quoted or not): a query it cannot read
// gets no look.
package look

import (
	"regexp"
	"strconv"
	"strings"
)

// fromTable finds a query's first table: FROM followed by an identifier,
// quoted or not.
var fromTable = regexp.MustCompile(`(?i)\bFROM\s+("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_]*)`)

// filterColumn finds the column a query's WHERE compares first.
var filterColumn = regexp.MustCompile(`(?i)\bWHERE\s+(?:LOWER\(TRIM\()?(?:([A-Za-z_][A-Za-z0-9_]*)\.)?("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_]*)\)*\s*(?:=|<>|IS\b)`)

// Tables lists a database's tables, by the engine whose error text asked
// for them.
const (
	SQLiteTables   = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
	PostgresTables = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name"
)

// Before returns the look that precedes query: the distinct values of the
// column its WHERE compares first, or else a few rows of its first table
// (to see its columns), with a sentence that says so. ok is false where
// query names no table it can read.
func Before(query string) (say, sql string, ok bool) {
	tab, col, ok := target(query)
	switch {
	case !ok:
		return "", "", false
	case col != "":
		return "First I look at the values " + unquote(col) + " takes in " + unquote(tab) + ".", values(col, tab), true
	}
	return "First I look at a few rows of " + unquote(tab) + " to see its columns.", rows(tab), true
}

// After returns the look a setback of query suggests: failed says the
// query was refused (observation is the error), otherwise it came back
// empty. A missing table (SQLite's "no such table", PostgreSQL's
// `relation "..." does not exist`) is looked for among the database's
// tables; any other error shows a row of the query's table (its columns
// and how a value is written), and an empty result the values of the column
// it filtered on, at most MaxValues of them. The looks are short, since they
// come after a setback, where a trajectory's room is shorter. ok is false
// where the query names no table it can read.
func After(query, observation string, failed bool) (sql string, ok bool) {
	switch {
	case failed && strings.Contains(observation, "no such table"):
		return SQLiteTables, true
	case failed && strings.Contains(observation, "relation \"") && strings.Contains(observation, "does not exist"):
		return PostgresTables, true
	}
	tab, col, ok := target(query)
	switch {
	case !ok:
		return "", false
	case !failed && col != "":
		return values(col, tab) + " LIMIT " + strconv.Itoa(MaxValues), true
	}
	return "SELECT * FROM " + tab + " LIMIT 1", true
}

// MaxValues bounds the values a look after an empty result lists (a date
// column may hold hundreds).
const MaxValues = 20

// target finds query's first table and the column its WHERE compares
// first ("" when none), resolving an
// alias ("TABLE AS alias") to its table.
func target(query string) (tab, col string, ok bool) {
	m := fromTable.FindStringSubmatch(query)
	if m == nil {
		return "", "", false
	}
	tab = m[1]
	f := filterColumn.FindStringSubmatch(query)
	if f == nil || strings.EqualFold(f[2], "NULL") {
		return tab, "", true
	}
	if f[1] != "" {
		if tab = aliased(query, f[1]); tab == "" {
			return "", "", false
		}
	}
	return tab, f[2], true
}

// aliased finds the table a query names with an alias: "TABLE AS alias".
func aliased(query, alias string) string {
	re := regexp.MustCompile(`(?i)("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_]*)\s+AS\s+` + regexp.QuoteMeta(alias) + `\b`)
	if m := re.FindStringSubmatch(query); m != nil {
		return m[1]
	}
	return ""
}

func values(col, tab string) string {
	return "SELECT DISTINCT " + col + " FROM " + tab + " ORDER BY " + col
}

func rows(tab string) string { return "SELECT * FROM " + tab + " LIMIT 3" }

func unquote(ident string) string {
	if strings.HasPrefix(ident, `"`) {
		return strings.ReplaceAll(strings.Trim(ident, `"`), `""`, `"`)
	}
	return ident
}
