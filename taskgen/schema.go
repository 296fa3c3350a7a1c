package taskgen

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/mcprl/mcprl/sandbox/sqldb"
)

// Kind is what a column holds, judged from its declared type and its values.
type Kind int

// Column kinds.
const (
	KindText Kind = iota
	KindInteger
	KindNumber
	KindDate
	KindBool
	KindOther
)

func (k Kind) String() string {
	return [...]string{"text", "integer", "number", "date", "bool", "other"}[k]
}

// Value is one distinct non-NULL value of a column and how many rows hold it.
type Value struct {
	V     any
	Count int64
}

// Column is one inspected column.
type Column struct {
	Name       string
	Type       string
	Kind       Kind
	PrimaryKey bool
	Nulls      int64 // rows where it is NULL
	// Values are the distinct non-NULL values with their counts, sorted by
	// their text; nil when there are more than the fixture's row cap.
	Values []Value
}

// Table is one inspected table.
type Table struct {
	Name    string
	Rows    int64
	Columns []*Column
	Key     *Column // a single integer column unique per row (the primary key), nil when none
	Label   *Column // a text column unique per row that names it (name, title, email), nil when none
}

// ForeignKey is a single-column reference from Table.Column to RefTable.RefColumn.
type ForeignKey struct {
	Table, Column, RefTable, RefColumn string
}

// Schema is a fixture database as the generator sees it.
type Schema struct {
	Backend     string // "sqlite" or "postgres"
	Tables      []*Table
	ForeignKeys []ForeignKey
}

// Table returns the table named name, or nil.
func (s *Schema) Table(name string) *Table {
	for _, t := range s.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Column returns the column named name, or nil.
func (t *Table) Column(name string) *Column {
	for _, c := range t.Columns {
		if c.Name == name {
			return c
		}
	}
	return nil
}

var isoDate = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}`)

// Inspect reads db's live schema (tables, columns, foreign keys) and the
// distribution of every column's values through trusted oracle queries.
// backend is "sqlite" or "postgres" (foreign keys are read from the
// engine's catalog).
func Inspect(ctx context.Context, db *sqldb.DB, backend string) (*Schema, error) {
	tables, err := db.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("taskgen: inspect: %w", err)
	}
	s := &Schema{Backend: backend}
	for _, lt := range tables {
		t := &Table{Name: lt.Name}
		res, err := db.Oracle(ctx, "SELECT COUNT(*) FROM "+ident(lt.Name))
		if err != nil {
			return nil, fmt.Errorf("taskgen: inspect %s: %w", lt.Name, err)
		}
		t.Rows = asInt(res.Rows[0][0])
		var pks []*Column
		for _, lc := range lt.Columns {
			c := &Column{Name: lc.Name, Type: lc.Type, PrimaryKey: lc.PrimaryKey}
			if err := inspectColumn(ctx, db, t, c); err != nil {
				return nil, err
			}
			t.Columns = append(t.Columns, c)
			if c.PrimaryKey {
				pks = append(pks, c)
			}
		}
		t.Key = findKey(t, pks)
		t.Label = findLabel(t)
		s.Tables = append(s.Tables, t)
	}
	if s.ForeignKeys, err = foreignKeys(ctx, db, backend, s); err != nil {
		return nil, err
	}
	return s, nil
}

func inspectColumn(ctx context.Context, db *sqldb.DB, t *Table, c *Column) error {
	id := ident(c.Name)
	res, err := db.Oracle(ctx, "SELECT "+id+", COUNT(*) FROM "+ident(t.Name)+" GROUP BY "+id)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A type the engine cannot group (json, arrays): no tasks about it.
		c.Kind = KindOther
		return nil
	}
	var vals []Value
	for _, r := range res.Rows {
		if r[0] == nil {
			c.Nulls = asInt(r[1])
			continue
		}
		vals = append(vals, Value{V: r[0], Count: asInt(r[1])})
	}
	if res.Truncated {
		nn, err := db.Oracle(ctx, "SELECT COUNT(*) - COUNT("+id+") FROM "+ident(t.Name))
		if err != nil {
			return fmt.Errorf("taskgen: inspect %s.%s: %w", t.Name, c.Name, err)
		}
		c.Nulls = asInt(nn.Rows[0][0])
	} else {
		sort.Slice(vals, func(i, j int) bool { return lessValue(vals[i].V, vals[j].V) })
		c.Values = vals
	}
	c.Kind = kindOf(c.Type, vals)
	return nil
}

// kindOf classifies a column by its declared type, then by its values.
func kindOf(typ string, vals []Value) Kind {
	t := strings.ToUpper(typ)
	switch {
	case strings.Contains(t, "BOOL"):
		return KindBool
	case strings.Contains(t, "DATE") || strings.Contains(t, "TIME"):
		return KindDate
	case strings.Contains(t, "INT") || strings.Contains(t, "SERIAL"):
		return KindInteger
	case strings.Contains(t, "NUMERIC") || strings.Contains(t, "DECIMAL") || strings.Contains(t, "REAL") ||
		strings.Contains(t, "FLOAT") || strings.Contains(t, "DOUBLE"):
		return KindNumber
	case strings.Contains(t, "CHAR") || strings.Contains(t, "TEXT") || strings.Contains(t, "CLOB"):
		allDates := len(vals) > 0
		for _, v := range vals {
			s, ok := v.V.(string)
			allDates = allDates && ok && isoDate.MatchString(s)
		}
		if allDates {
			return KindDate
		}
		return KindText
	}
	if len(vals) == 0 {
		return KindOther
	}
	switch v := vals[0].V.(type) {
	case int64:
		return KindInteger
	case float64:
		return KindNumber
	case bool:
		return KindBool
	case string:
		if isoDate.MatchString(v) {
			return KindDate
		}
		return KindText
	}
	return KindOther
}

func unique(t *Table, c *Column) bool {
	return c.Nulls == 0 && c.Values != nil && int64(len(c.Values)) == t.Rows && t.Rows > 0
}

func findKey(t *Table, pks []*Column) *Column {
	if len(pks) == 1 && pks[0].Kind == KindInteger {
		return pks[0]
	}
	if len(pks) > 1 {
		return nil
	}
	if c := t.Column("id"); c != nil && c.Kind == KindInteger && unique(t, c) {
		return c
	}
	return nil
}

func findLabel(t *Table) *Column {
	var best *Column
	bestScore := -1
	for _, c := range t.Columns {
		if c.Kind != KindText || c == t.Key || !unique(t, c) {
			continue
		}
		clean := true
		for _, v := range c.Values {
			s, _ := v.V.(string)
			clean = clean && s == strings.TrimSpace(s) && s != "" && isASCII(s) && len(s) <= 60
		}
		if !clean {
			continue
		}
		score := 0
		n := strings.ToLower(c.Name)
		switch {
		case strings.Contains(n, "name") || strings.Contains(n, "title"):
			score = 3
		case strings.Contains(n, "email") || strings.Contains(n, "code"):
			score = 2
		}
		if score > bestScore {
			best, bestScore = c, score
		}
	}
	return best
}

// foreignKeys reads single-column foreign keys from the engine's catalog
// and keeps those between inspected tables.
func foreignKeys(ctx context.Context, db *sqldb.DB, backend string, s *Schema) ([]ForeignKey, error) {
	var q string
	if backend == "postgres" {
		q = `SELECT cl.relname, a.attname, rc.relname, ra.attname
FROM pg_constraint AS k
JOIN pg_class AS cl ON cl.oid = k.conrelid
JOIN pg_class AS rc ON rc.oid = k.confrelid
JOIN pg_attribute AS a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
JOIN pg_attribute AS ra ON ra.attrelid = k.confrelid AND ra.attnum = k.confkey[1]
WHERE k.contype = 'f' AND cardinality(k.conkey) = 1 AND cl.relnamespace = current_schema()::regnamespace
ORDER BY 1, 2`
	} else {
		q = `SELECT m.name, f."from", f."table", f."to"
FROM sqlite_schema AS m JOIN pragma_foreign_key_list(m.name) AS f
WHERE m.type = 'table' AND f.id IN (SELECT g.id FROM pragma_foreign_key_list(m.name) AS g GROUP BY g.id HAVING COUNT(*) = 1)
ORDER BY 1, 2`
	}
	res, err := db.Oracle(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("taskgen: foreign keys: %w", err)
	}
	var out []ForeignKey
	for _, r := range res.Rows {
		fk := ForeignKey{Table: str(r[0]), Column: str(r[1]), RefTable: str(r[2]), RefColumn: str(r[3])}
		ref := s.Table(fk.RefTable)
		if ref == nil || s.Table(fk.Table) == nil || s.Table(fk.Table).Column(fk.Column) == nil {
			continue
		}
		if fk.RefColumn == "" && ref.Key != nil {
			fk.RefColumn = ref.Key.Name
		}
		if ref.Column(fk.RefColumn) == nil {
			continue
		}
		out = append(out, fk)
	}
	return out, nil
}

func str(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}

func lessValue(a, b any) bool {
	fa, oka := asFloat(a)
	fb, okb := asFloat(b)
	if oka && okb {
		return fa < fb
	}
	return fmt.Sprint(a) < fmt.Sprint(b)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// sqlKeywords are words that must be quoted as identifiers.
var sqlKeywords = map[string]bool{
	"order": true, "group": true, "user": true, "select": true, "from": true, "where": true, "table": true,
	"index": true, "key": true, "limit": true, "offset": true, "join": true, "left": true, "right": true,
	"by": true, "to": true, "as": true, "on": true, "and": true, "or": true, "not": true, "null": true,
	"case": true, "when": true, "end": true, "check": true, "default": true, "primary": true, "references": true,
	"desc": true, "asc": true, "all": true, "distinct": true, "in": true, "is": true, "like": true, "values": true,
}

// ident writes a portable SQL identifier: bare when it is a plain
// lower-case name, else double-quoted.
func ident(s string) string {
	if plainIdent.MatchString(s) && !sqlKeywords[s] {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// literal writes a value as a portable SQL literal.
func literal(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		if x {
			return "TRUE"
		}
		return "FALSE"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return "'" + strings.ReplaceAll(str(v), "'", "''") + "'"
}

// show writes a value as the answer states it.
func show(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return str(v)
}
