package lint

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcprl/mcprl/sandbox/sqldb"
)

// createTable finds the table name of a CREATE TABLE statement (group 1),
// optionally schema-qualified and quoted.
var createTable = regexp.MustCompile(`(?is)^CREATE\s+(?:(?:GLOBAL|LOCAL)\s+)?(?:(?:TEMP|TEMPORARY|UNLOGGED)\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?((?:(?:"[^"]+"|\w+)\.)?(?:"[^"]+"|` + "`[^`]+`" + `|\[[^\]]+\]|\w+))`)

// createOther matches CREATE statements for objects other than tables, whose
// "already exists" errors mean the object agrees by name with the database.
var createOther = regexp.MustCompile(`(?is)^CREATE\s+(?:OR\s+REPLACE\s+)?(?:UNIQUE\s+)?(?:TEMP\s+|TEMPORARY\s+)?(?:INDEX|VIEW|TRIGGER|SEQUENCE|TYPE|SCHEMA|EXTENSION)\b`)

// lastIdent is the last component of a possibly qualified, quoted name.
var lastIdent = regexp.MustCompile(`(?:"([^"]+)"|` + "`([^`]+)`" + `|\[([^\]]+)\]|(\w+))$`)

// bareName strips quotes and a schema qualifier and lowercases name.
func bareName(name string) string {
	if m := lastIdent.FindStringSubmatch(name); m != nil {
		for _, g := range m[1:] {
			if g != "" {
				return strings.ToLower(g)
			}
		}
	}
	return strings.ToLower(name)
}

// lintSQL applies every statement of src to a scratch fork of the fixture's
// database and checks the tables the file creates or mentions against the
// live schema.
func lintSQL(ctx context.Context, rel string, src []byte, dbs Databases) (*Result, error) {
	res := &Result{Path: rel, Linter: "sql"}
	text := string(src)
	if dbs.Scratch == nil || dbs.Live == nil {
		return nil, fmt.Errorf("lint: SQL linting needs a scratch and a live database")
	}
	stmts := splitSQL(text, dbs.Live.Dialect())
	scratch, err := dbs.Scratch(ctx)
	if err != nil {
		return nil, fmt.Errorf("lint: scratch database: %w", err)
	}
	defer scratch.Close()
	liveTables, err := dbs.Live.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("lint: live schema: %w", err)
	}
	live := tableMap(liveTables)
	before, err := scratch.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("lint: scratch schema: %w", err)
	}
	exists := tableMap(before)

	add := func(st statement, msg string) {
		res.Findings = append(res.Findings, Finding{Line: st.Line, Message: msg})
	}
	checked := map[string]bool{} // tables whose definition was compared already
	for i, st := range stmts {
		if m := createTable.FindStringSubmatchIndex(st.Text); m != nil {
			name := bareName(st.Text[m[2]:m[3]])
			if _, ok := exists[name]; ok {
				// The table exists: create the file's definition under another
				// name and compare it column by column with the live table.
				tmp := fmt.Sprintf("mcprl_lint_%d", i)
				rewritten := st.Text[:m[2]] + tmp + st.Text[m[3]:]
				if _, err := scratch.Query(ctx, rewritten); err != nil {
					if !isQueryError(err) {
						return nil, fmt.Errorf("lint: applying %s:%d: %w", rel, st.Line, err)
					}
					add(st, strings.ReplaceAll(err.Error(), tmp, name))
					continue
				}
				tables, err := scratch.Tables(ctx)
				if err != nil {
					return nil, fmt.Errorf("lint: scratch schema: %w", err)
				}
				got := tableMap(tables)[tmp]
				if want, ok := live[name]; ok {
					res.Findings = append(res.Findings, compareTable(name, st, got, want, "here", "in this file")...)
				} else {
					add(st, fmt.Sprintf("table %s is defined here but does not exist in the live database", name))
				}
				checked[name] = true
				if _, err := scratch.Query(ctx, "DROP TABLE "+tmp); err != nil {
					return nil, fmt.Errorf("lint: dropping scratch table: %w", err)
				}
				continue
			}
		}
		if _, err := scratch.Query(ctx, st.Text); err != nil {
			if !isQueryError(err) {
				return nil, fmt.Errorf("lint: applying %s:%d: %w", rel, st.Line, err)
			}
			if createOther.MatchString(st.Text) && strings.Contains(strings.ToLower(err.Error()), "already exists") {
				continue // the database has it already
			}
			res.Findings = append(res.Findings, errorFinding(st, err.Error()))
		}
	}

	// Schema integrity: every table the file mentions must look the same in
	// the schema the file produces as in the live database.
	afterTables, err := scratch.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("lint: scratch schema: %w", err)
	}
	after := tableMap(afterTables)
	names := map[string]bool{}
	for n := range after {
		names[n] = true
	}
	for n := range live {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, name := range sorted {
		if checked[name] {
			continue
		}
		st, ok := lastMention(stmts, name)
		if !ok {
			continue
		}
		got, inFile := after[name]
		want, inLive := live[name]
		switch {
		case inFile && !inLive:
			add(st, fmt.Sprintf("table %s does not exist in the live database", name))
		case !inFile && inLive:
			add(st, fmt.Sprintf("table %s exists in the live database but not after this file is applied", name))
		default:
			res.Findings = append(res.Findings, compareTable(name, st, got, want,
				"after this file", "in the fixture's schema with this file applied")...)
		}
	}
	sort.SliceStable(res.Findings, func(i, j int) bool { return res.Findings[i].Line < res.Findings[j].Line })
	if len(res.Findings) > 0 {
		res.ExitCode = 1
	}
	return res, nil
}

// pgPosition is PostgreSQL's "at character N" (1-based, in characters of
// the statement) at the end of an error message.
var pgPosition = regexp.MustCompile(` at character (\d+)$`)

// errorFinding places a statement's error on its line, or on the exact
// line and column when the database reports a position.
func errorFinding(st statement, msg string) Finding {
	m := pgPosition.FindStringSubmatchIndex(msg)
	if m == nil {
		return sqliteFinding(st, msg)
	}
	pos, _ := strconv.Atoi(msg[m[2]:m[3]])
	runes := []rune(st.Text)
	if pos < 1 || pos > len(runes)+1 {
		return Finding{Line: st.Line, Message: msg}
	}
	before := string(runes[:pos-1])
	line := st.Line + strings.Count(before, "\n")
	col := pos
	if i := strings.LastIndexByte(before, '\n'); i >= 0 {
		col = len([]rune(before[i+1:])) + 1
	} else if st.Col > 0 {
		col += st.Col - 1
	}
	return Finding{Line: line, Column: col, Message: msg[:m[0]]}
}

// sqliteMissing is SQLite's error for an unknown column or table.
var sqliteMissing = regexp.MustCompile(`no such (?:column|table): ([\w.]+)$`)

// sqliteFinding places SQLite's "no such column/table: X" on the line and
// column of X when X occurs exactly once in the statement (SQLite reports
// no position); otherwise on the statement's first line.
func sqliteFinding(st statement, msg string) Finding {
	f := Finding{Line: st.Line, Message: msg}
	m := sqliteMissing.FindStringSubmatch(msg)
	if m == nil {
		return f
	}
	re := regexp.MustCompile(`(?i)(?:^|[^\w.])(` + regexp.QuoteMeta(m[1]) + `)(?:$|[^\w])`)
	locs := re.FindAllStringSubmatchIndex(st.Text, -1)
	if len(locs) != 1 {
		return f
	}
	before := st.Text[:locs[0][2]]
	f.Line = st.Line + strings.Count(before, "\n")
	if i := strings.LastIndexByte(before, '\n'); i >= 0 {
		f.Column = utf8.RuneCountInString(before[i+1:]) + 1
	} else {
		f.Column = st.Col + utf8.RuneCountInString(before)
	}
	return f
}

func isQueryError(err error) bool {
	var qe *sqldb.QueryError
	return errors.As(err, &qe)
}

func tableMap(ts []sqldb.Table) map[string]sqldb.Table {
	m := make(map[string]sqldb.Table, len(ts))
	for _, t := range ts {
		m[strings.ToLower(t.Name)] = t
	}
	return m
}

// lastMention returns the last statement that names table as a word.
func lastMention(stmts []statement, table string) (statement, bool) {
	re := regexp.MustCompile(`(?i)(^|[^\w])` + regexp.QuoteMeta(table) + `($|[^\w])`)
	for i := len(stmts) - 1; i >= 0; i-- {
		if re.MatchString(stmts[i].Text) {
			return stmts[i], true
		}
	}
	return statement{}, false
}

// lineOf returns the line within st where word first appears (st's own line
// when it does not).
func lineOf(st statement, word string) int {
	re := regexp.MustCompile(`(?i)(^|[^\w])` + regexp.QuoteMeta(word) + `($|[^\w])`)
	loc := re.FindStringIndex(st.Text)
	if loc == nil {
		return st.Line
	}
	return st.Line + strings.Count(st.Text[:loc[0]], "\n")
}

// compareTable reports how got (the file's version of a table) differs from
// want (the live table); here and inFile say where got comes from.
func compareTable(name string, st statement, got, want sqldb.Table, here, inFile string) []Finding {
	var out []Finding
	gotCols := map[string]sqldb.Column{}
	for _, c := range got.Columns {
		gotCols[strings.ToLower(c.Name)] = c
	}
	wantCols := map[string]sqldb.Column{}
	for _, c := range want.Columns {
		wantCols[strings.ToLower(c.Name)] = c
	}
	for _, c := range got.Columns {
		w, ok := wantCols[strings.ToLower(c.Name)]
		line := lineOf(st, c.Name)
		switch {
		case !ok:
			out = append(out, Finding{Line: line, Message: fmt.Sprintf("column %s.%s is not in the live database", name, c.Name)})
		case !strings.EqualFold(normType(c.Type), normType(w.Type)):
			out = append(out, Finding{Line: line, Message: fmt.Sprintf("column %s.%s has type %s %s but %s in the live database", name, c.Name, c.Type, here, w.Type)})
		case c.NotNull != w.NotNull:
			out = append(out, Finding{Line: line, Message: fmt.Sprintf("column %s.%s is %s %s but %s in the live database", name, c.Name, nullity(c.NotNull), here, nullity(w.NotNull))})
		}
	}
	for _, c := range want.Columns {
		if _, ok := gotCols[strings.ToLower(c.Name)]; !ok {
			out = append(out, Finding{Line: st.Line, Message: fmt.Sprintf("column %s.%s exists in the live database but not %s", name, c.Name, inFile)})
		}
	}
	return out
}

func normType(t string) string { return strings.Join(strings.Fields(t), " ") }

func nullity(notNull bool) string {
	if notNull {
		return "NOT NULL"
	}
	return "nullable"
}
