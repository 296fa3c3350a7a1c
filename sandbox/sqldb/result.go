package sqldb

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Result is what one statement returned. Values in Rows are JSON-friendly:
// int64, float64, string, bool or nil (blobs become strings, times their
// ISO text).
type Result struct {
	Columns      []string `json:"columns"`
	Rows         [][]any  `json:"rows"`
	RowsAffected int64    `json:"rows_affected"`
	Truncated    bool     `json:"truncated,omitempty"`

	cutReason string // why Truncated, for Text
}

// Empty reports whether r answers a question with nothing: r is nil or has no rows, or its one cell holds 0 (a
// count of nothing). Thinned copies of the data cannot tell such answers apart; a task's witness_sql changes them
// (DB.Witnessed).
func (r *Result) Empty() bool {
	if r == nil || len(r.Rows) == 0 {
		return true
	}
	if len(r.Rows) != 1 || len(r.Rows[0]) != 1 || r.Rows[0][0] == nil {
		return false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(fmt.Sprint(r.Rows[0][0])), 64)
	return err == nil && f == 0
}

// collector accumulates rows up to the caps.
type collector struct {
	res   *Result
	lim   limits
	bytes int
	done  bool
}

// maxColumnName bounds one column name in a Result: SQLite names an
// expression's column by its text, so SELECT '<10 MB literal>' has a 10 MB
// column name.
const maxColumnName = 256

func newCollector(cols []string, lim limits) *collector {
	r := &Result{Columns: make([]string, len(cols)), Rows: [][]any{}}
	c := &collector{res: r, lim: lim}
	for i, name := range cols {
		if len(name) > maxColumnName {
			cut := maxColumnName
			for cut > 0 && !utf8.RuneStart(name[cut]) {
				cut--
			}
			name = name[:cut] + "…"
		}
		r.Columns[i] = name
		c.bytes += valueSize(name)
	}
	if c.bytes > lim.maxBytes {
		c.cut(fmt.Sprintf("column names of more than %d bytes", lim.maxBytes))
	}
	return c
}

// add appends a row of already-normalized values; it reports false once a
// cap is reached (the row is then dropped and the result marked cut).
func (c *collector) add(row []any) bool {
	if c.done {
		return false
	}
	if len(c.res.Rows) >= c.lim.maxRows {
		c.cut(fmt.Sprintf("more than %d rows", c.lim.maxRows))
		return false
	}
	n := 0
	for _, v := range row {
		n += valueSize(v)
	}
	if c.bytes+n > c.lim.maxBytes {
		c.cut(fmt.Sprintf("more than %d bytes", c.lim.maxBytes))
		return false
	}
	c.bytes += n
	c.res.Rows = append(c.res.Rows, row)
	return true
}

func (c *collector) cut(reason string) {
	c.done = true
	c.res.Truncated = true
	c.res.cutReason = reason
}

func valueSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 2
	case nil:
		return 4
	default:
		return 8
	}
}

// normalize turns a driver value into a JSON-friendly one.
func normalize(v any) any {
	switch x := v.(type) {
	case nil, int64, string, bool:
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		return x
	case float32:
		return normalize(float64(x))
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case int8:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return fmt.Sprintf("\\x%x", x)
	case time.Time:
		return formatTime(x)
	case json.RawMessage:
		return string(x)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// formatTime writes dates as YYYY-MM-DD and timestamps as PostgreSQL does.
func formatTime(t time.Time) string {
	if t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 && t.Nanosecond() == 0 && t.Location() == time.UTC {
		return t.Format("2006-01-02")
	}
	if t.Location() == time.UTC {
		return t.Format("2006-01-02 15:04:05.999999")
	}
	return t.Format("2006-01-02 15:04:05.999999-07:00")
}

// Text renders the result as a readable table for the model; it says when
// the result was cut and how many rows a statement affected.
func (r *Result) Text() string {
	var b strings.Builder
	if len(r.Columns) == 0 {
		fmt.Fprintf(&b, "OK: %d row(s) affected", r.RowsAffected)
		return b.String()
	}
	cells := make([][]string, 0, len(r.Rows)+1)
	cells = append(cells, r.Columns)
	for _, row := range r.Rows {
		line := make([]string, len(r.Columns))
		for i := range line {
			if i < len(row) {
				line[i] = cellText(row[i])
			}
		}
		cells = append(cells, line)
	}
	width := make([]int, len(r.Columns))
	for _, line := range cells {
		for i, c := range line {
			if n := utf8.RuneCountInString(c); n > width[i] {
				width[i] = n
			}
		}
	}
	for li, line := range cells {
		for i, c := range line {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c)
			if i < len(line)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)))
			}
		}
		b.WriteByte('\n')
		if li == 0 {
			for i, w := range width {
				if i > 0 {
					b.WriteString("-+-")
				}
				b.WriteString(strings.Repeat("-", w))
			}
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "(%d row%s", len(r.Rows), plural(len(r.Rows)))
	if r.RowsAffected > 0 {
		fmt.Fprintf(&b, "; %d row(s) affected", r.RowsAffected)
	}
	b.WriteString(")")
	if r.Truncated {
		reason := r.cutReason
		if reason == "" {
			reason = "the size limit"
		}
		fmt.Fprintf(&b, "\n[result truncated: the query returned %s; only the first %d row(s) are shown. Add a WHERE, LIMIT or aggregate to see the rest.]", reason, len(r.Rows))
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		x = strings.ReplaceAll(x, "\n", `\n`)
		x = strings.ReplaceAll(x, "\r", `\r`)
		x = strings.ReplaceAll(x, "\t", `\t`)
		if utf8.RuneCountInString(x) > 200 {
			x = string([]rune(x)[:200]) + "…"
		}
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}
