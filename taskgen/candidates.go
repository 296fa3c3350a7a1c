package taskgen

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mcprl/mcprl/sandbox/sqldb"
)

// group is the rows of a text column whose values are equal once case and
// surrounding spaces are ignored.
type group struct {
	norm  string   // lower-case, trimmed
	forms []string // the stored spellings
	count int64
}

// clean reports whether the group is stored in one spelling without stray spaces.
func (g group) clean() bool { return len(g.forms) == 1 && g.forms[0] == strings.TrimSpace(g.forms[0]) }

// match returns the WHERE clause selecting the group's rows by column col (an
// SQL identifier) and the value a question names: the stored value when it has
// one clean spelling, else the normalised one compared with LOWER(TRIM(col)).
func (g group) match(col string) (where, v string) {
	if g.clean() {
		return " WHERE " + col + " = " + literal(g.forms[0]), g.forms[0]
	}
	return " WHERE LOWER(TRIM(" + col + ")) = " + literal(g.norm), g.norm
}

// groups returns a categorical text column's value groups, or nil when the
// column is not categorical (too many values, non-ASCII, or unique per row).
func groups(t *Table, c *Column) []group {
	if c.Kind != KindText || c.Values == nil || c == t.Key || c == t.Label || t.Rows < 4 {
		return nil
	}
	var out []group
	idx := map[string]int{}
	for _, v := range c.Values {
		s, ok := v.V.(string)
		if !ok || !isASCII(s) || strings.TrimSpace(s) == "" || len(s) > 40 {
			return nil
		}
		n := strings.ToLower(strings.TrimSpace(s))
		i, seen := idx[n]
		if !seen {
			i = len(out)
			idx[n] = i
			out = append(out, group{norm: n})
		}
		out[i].forms = append(out[i].forms, s)
		out[i].count += v.Count
	}
	if len(out) < 2 || len(out) > 12 || int64(len(out)) >= t.Rows {
		return nil
	}
	return out
}

// candidates lists every question the schema offers, in a deterministic order.
func (g *gen) candidates() []*cand {
	var out []*cand
	add := func(c *cand) {
		c.used = map[int]bool{}
		out = append(out, c)
	}
	for _, t := range g.s.Tables {
		if t.Rows == 0 {
			continue
		}
		g.countCands(t, add)
		g.filterListCands(t, add)
		g.nullCands(t, add)
		g.dateCands(t, add)
		g.edgeCands(t, add)
		g.emptyCands(t, add)
	}
	for _, fk := range g.s.ForeignKeys {
		g.joinCands(fk, add)
	}
	g.lintCands(add)
	return out
}

// words gives a template's usual placeholders for table t.
func words(t *Table) map[string]string {
	return map[string]string{"n": plural(t.Name), "one": singular(t.Name), "table": t.Name}
}

func with(m map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(m)+len(kv)/2)
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func fillAll(tmpls []string, kv map[string]string) []string {
	out := make([]string, len(tmpls))
	for i, t := range tmpls {
		out[i] = fill(t, kv)
	}
	return out
}

// cell is the value of a one-cell result as the answer states it.
func cell(res *sqldb.Result) string { return show(res.Rows[0][0]) }

// idList writes the first column of rows: "2, 8 and 9".
func idList(res *sqldb.Result) string {
	var xs []string
	for _, r := range res.Rows {
		if len(r) == 1 {
			xs = append(xs, show(r[0]))
		} else {
			parts := make([]string, len(r)-1)
			for i, v := range r[1:] {
				parts[i] = show(v)
			}
			xs = append(xs, show(r[0])+" ("+strings.Join(parts, ", ")+")")
		}
	}
	return joinList(xs)
}

func (g *gen) says(opts ...string) string { return pick(g.rng, opts) }

func (g *gen) oneAnswer(tmpls ...string) func(*sqldb.Result) string {
	return func(res *sqldb.Result) string {
		v := cell(res)
		return g.agree(upperFirst(strings.ReplaceAll(article(pick(g.rng, tmpls)), "{v}", v)), v)
	}
}

func (g *gen) listAnswer(tmpls ...string) func(*sqldb.Result) string {
	return func(res *sqldb.Result) string {
		s := article(pick(g.rng, tmpls))
		k := strconv.Itoa(len(res.Rows))
		s = strings.ReplaceAll(s, "{k}", k)
		return g.agree(upperFirst(strings.ReplaceAll(s, "{ids}", idList(res))), k)
	}
}

// agree puts the answer's nouns and verbs in the singular when its count is 1.
func (g *gen) agree(s, count string) string {
	if count != "1" {
		return s
	}
	for _, r := range [][2]string{{"There are 1 ", "There is 1 "}, {"there are 1 ", "there is 1 "}, {"ids are ", "id is "}, {"ids ", "id "}} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	for _, t := range g.s.Tables {
		p, one := plural(t.Name), singular(t.Name)
		re := regexp.MustCompile(`(^|[^0-9.,])1 (such )?` + regexp.QuoteMeta(p) + `( have| belong| match)?\b`)
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			m = strings.Replace(m, p, one, 1)
			for _, v := range [][2]string{{" have", " has"}, {" belong", " belongs"}, {" match", " matches"}} {
				if strings.HasSuffix(m, v[0]) {
					m = strings.TrimSuffix(m, v[0]) + v[1]
				}
			}
			return m
		})
	}
	return s
}

func sel(t *Table) string { return "SELECT COUNT(*) FROM " + ident(t.Name) }

func (g *gen) countCands(t *Table, add func(*cand)) {
	w := words(t)
	add(&cand{cat: "count", shape: oneCell,
		texts: fillAll([]string{
			"How many {n} are there?",
			"What is the total number of {n} in the database?",
			"Count the {n}.",
			"How many {one} records does the database hold?",
			"Tell me how many {n} exist.",
		}, w),
		oracle: sel(t),
		steps:  []step{{g.says("", "I count the rows of the "+t.Name+" table."), sel(t)}},
		answer: g.oneAnswer("There are {v} "+w["n"]+".", "The database holds {v} "+w["n"]+".", "{v} "+w["n"]+" in total."),
	})
	for _, c := range t.Columns {
		gs := groups(t, c)
		clean := gs != nil
		for _, gr := range gs {
			clean = clean && gr.clean()
		}
		if clean {
			cw := with(w, "col", colWords(c.Name))
			sql := "SELECT COUNT(DISTINCT " + ident(c.Name) + ") FROM " + ident(t.Name)
			add(&cand{cat: "count", shape: oneCell,
				texts: fillAll([]string{
					"How many different {col} values appear among the {n}?",
					"How many distinct {col} values do the {n} have?",
					"Across all {n}, how many different values of {col} are recorded (not counting missing ones)?",
				}, cw),
				oracle: sql, steps: []step{{"", sql}},
				answer: g.oneAnswer("{v} different "+cw["col"]+" values appear among the "+w["n"]+".", "The "+w["n"]+" have {v} distinct "+cw["col"]+" values."),
			})
		}
		if (c.Kind == KindInteger || c.Kind == KindNumber) && c != t.Key && !g.isFK(t, c) && c.Values != nil && len(c.Values) >= 3 {
			cw := with(w, "col", colWords(c.Name))
			for _, agg := range []struct{ fn, word string }{{"MAX", "highest"}, {"MIN", "lowest"}} {
				sql := "SELECT " + agg.fn + "(" + ident(c.Name) + ") FROM " + ident(t.Name)
				texts := fillAll([]string{
					"What is the " + agg.word + " {col} of any {one}?",
					"Which value is the " + agg.word + " {col} among the {n}?",
					"Find the " + agg.word + " {col} recorded for the {n}.",
				}, cw)
				answer := g.oneAnswer("The "+agg.word+" "+cw["col"]+" is {v}.", "{v} is the "+agg.word+" "+cw["col"]+" among the "+w["n"]+".")
				if countable(cw["col"]) {
					most := map[string]string{"MAX": "most", "MIN": "fewest"}[agg.fn]
					texts = fillAll([]string{
						"What is the " + most + " {col} any {one} has?",
						"How many {col} does the {one} with the " + most + " {col} have?",
					}, cw)
					answer = g.oneAnswer("The "+most+" "+cw["col"]+" any "+w["one"]+" has is {v}.", "The "+w["one"]+" with the "+most+" "+cw["col"]+" has {v}.")
				}
				add(&cand{cat: "count", shape: oneCell, texts: texts, oracle: sql, steps: []step{{"", sql}}, answer: answer})
			}
			if c.Kind == KindInteger && !strings.Contains(strings.ToLower(c.Name), "year") && !strings.HasSuffix(strings.ToLower(c.Name), "id") {
				sql := "SELECT SUM(" + ident(c.Name) + ") FROM " + ident(t.Name)
				add(&cand{cat: "count", shape: oneCell,
					texts: fillAll([]string{
						"What is the total {col} across all {n}?",
						"Add up the {col} of every {one}: what is the sum?",
					}, cw),
					oracle: sql, steps: []step{{"", sql}},
					answer: g.oneAnswer("The "+w["n"]+" have a total "+cw["col"]+" of {v}.", "Summed over all "+w["n"]+", the "+cw["col"]+" is {v}."),
				})
			}
		}
	}
}

func (g *gen) isFK(t *Table, c *Column) bool {
	for _, fk := range g.s.ForeignKeys {
		if fk.Table == t.Name && fk.Column == c.Name {
			return true
		}
	}
	return false
}

// thresholds picks values of a sorted numeric column to compare against.
func thresholds(c *Column) []any {
	n := len(c.Values)
	if n < 4 {
		return nil
	}
	return []any{c.Values[n/3].V, c.Values[(2*n)/3].V}
}

func (g *gen) filterListCands(t *Table, add func(*cand)) {
	w := words(t)
	for _, c := range t.Columns {
		cw := with(w, "col", colWords(c.Name))
		col, tab := ident(c.Name), ident(t.Name)
		for _, gr := range groups(t, c) {
			if !gr.clean() {
				continue
			}
			v := gr.forms[0]
			vw := with(cw, "v", v)
			where := " WHERE " + col + " = " + literal(v)
			add(&cand{cat: "filter", shape: oneCell,
				texts: fillAll([]string{
					"How many {n} have {col} '{v}'?",
					"How many {n} are there whose {col} is '{v}'?",
					"Count the {n} with a {col} of '{v}'.",
					"What number of {n} have '{v}' as their {col}?",
				}, vw),
				oracle: "SELECT COUNT(*) FROM " + tab + where,
				steps:  []step{{"", "SELECT COUNT(*) FROM " + tab + where}},
				answer: g.oneAnswer("{v} "+w["n"]+" have "+cw["col"]+" '"+v+"'.", "There are {v} "+w["n"]+" whose "+cw["col"]+" is '"+v+"'."),
			})
			if t.Key != nil {
				key := ident(t.Key.Name)
				add(&cand{cat: "list", shape: rowList,
					texts: fillAll([]string{
						"List the ids of the {n} whose {col} is '{v}'.",
						"Which {n} have {col} '{v}'? Give their ids.",
						"Give me the ids of all {n} with {col} equal to '{v}'.",
					}, vw),
					oracle: "SELECT " + key + " FROM " + tab + where,
					steps:  []step{{"", "SELECT " + key + " FROM " + tab + where + " ORDER BY " + key}},
					answer: g.listAnswer("{k} "+w["n"]+" have "+cw["col"]+" '"+v+"': ids {ids}.", "The ids of the "+w["n"]+" with "+cw["col"]+" '"+v+"' are {ids}."),
				})
				if lab := t.Label; lab != nil {
					lw := with(vw, "label", pluralize(colWords(lab.Name)))
					sql := "SELECT " + key + ", " + ident(lab.Name) + " FROM " + tab + where
					add(&cand{cat: "list", shape: rowList,
						texts: fillAll([]string{
							"Which {n} have {col} '{v}'? Give their ids and {label}.",
							"List the id and {label} of every {one} whose {col} is '{v}'.",
						}, lw),
						oracle: sql, steps: []step{{"", sql + " ORDER BY " + key}},
						answer: g.listAnswer("{k} "+w["n"]+" have "+cw["col"]+" '"+v+"' (id and "+colWords(lab.Name)+"): {ids}.", "Those with "+cw["col"]+" '"+v+"' are {ids}."),
					})
				}
			}
		}
		if c.Kind == KindBool && c.Values != nil && len(c.Values) == 2 {
			for _, b := range []bool{true, false} {
				bs := strconv.FormatBool(b)
				where := " WHERE " + col + " = " + literal(b)
				add(&cand{cat: "filter", shape: oneCell,
					texts: fillAll([]string{
						"How many {n} have {col} set to " + bs + "?",
						"Count the {n} whose {col} flag is " + bs + ".",
					}, cw),
					oracle: "SELECT COUNT(*) FROM " + tab + where,
					steps:  []step{{"", "SELECT COUNT(*) FROM " + tab + where}},
					answer: g.oneAnswer("{v} " + w["n"] + " have " + cw["col"] + " set to " + bs + "."),
				})
			}
		}
		if (c.Kind == KindInteger || c.Kind == KindNumber) && c != t.Key && !g.isFK(t, c) {
			for _, th := range thresholds(c) {
				x := show(th)
				for _, op := range []struct{ sym, word, count string }{{">", "greater than", "more than"}, {"<=", "at most", "at most"}} {
					// "a total greater than 80" or, for a count-like column, "more than 553 pages".
					phrase := "a " + cw["col"] + " " + op.word + " " + x
					filterT := []string{"How many {n} have {phrase}?", "Count the {n} whose {col} is {op} {x}.", "What is the number of {n} with {col} {op} {x}?"}
					listT := []string{"List the ids of the {n} with {phrase}.", "Which {n} have {col} {op} {x}? Give their ids."}
					if countable(cw["col"]) {
						phrase = op.count + " " + x + " " + cw["col"]
						filterT = []string{"How many {n} have {phrase}?", "Count the {n} with {phrase}.", "What is the number of {n} that have {phrase}?"}
						listT = []string{"List the ids of the {n} with {phrase}.", "Which {n} have {phrase}? Give their ids."}
					}
					xw := with(cw, "x", x, "op", op.word, "phrase", phrase)
					where := " WHERE " + col + " " + op.sym + " " + literal(th)
					add(&cand{cat: "filter", shape: oneCell,
						texts:  fillAll(filterT, xw),
						oracle: "SELECT COUNT(*) FROM " + tab + where,
						steps:  []step{{"", "SELECT COUNT(*) FROM " + tab + where}},
						answer: g.oneAnswer("{v} "+w["n"]+" have "+phrase+".", "There are {v} such "+w["n"]+"."),
					})
					if t.Key != nil {
						key := ident(t.Key.Name)
						add(&cand{cat: "list", shape: rowList,
							texts:  fillAll(listT, xw),
							oracle: "SELECT " + key + " FROM " + tab + where,
							steps:  []step{{"", "SELECT " + key + " FROM " + tab + where + " ORDER BY " + key}},
							answer: g.listAnswer("{k} "+w["n"]+" have "+phrase+": ids {ids}.", "Their ids are {ids}."),
						})
					}
				}
			}
			// Top k by the column, when the order is unique (no ties).
			if t.Key != nil && c.Values != nil {
				key := ident(t.Key.Name)
				for _, dir := range []struct{ sql, word string }{{"DESC", "highest"}, {"ASC", "lowest"}} {
					k := 3
					if len(c.Values) < k+1 {
						continue
					}
					vals := c.Values
					top := vals[len(vals)-k:]
					if dir.sql == "ASC" {
						top = vals[:k]
					}
					unique := true
					for _, v := range top {
						unique = unique && v.Count == 1
					}
					if !unique {
						continue
					}
					sql := "SELECT " + key + " FROM " + tab + " WHERE " + col + " IS NOT NULL ORDER BY " + col + " " + dir.sql + ", " + key + " LIMIT " + strconv.Itoa(k)
					kw := with(cw, "k", strconv.Itoa(k), "dir", dir.word)
					add(&cand{cat: "list", shape: rowList,
						texts: fillAll([]string{
							"Which {k} {n} have the {dir} {col}? Give their ids, {dir} first.",
							"List the ids of the {k} {n} with the {dir} {col}, in order.",
						}, kw),
						oracle: sql, steps: []step{{"", sql}},
						answer: g.listAnswer("The " + strconv.Itoa(k) + " " + w["n"] + " with the " + dir.word + " " + cw["col"] + " are ids {ids}, in that order."),
					})
				}
			}
		}
	}
}

func (g *gen) nullCands(t *Table, add func(*cand)) {
	w := words(t)
	tab := ident(t.Name)
	for _, c := range t.Columns {
		if c.Nulls == 0 || c.Kind == KindOther || c.PrimaryKey {
			continue
		}
		name := colWords(c.Name)
		if c.Kind == KindDate {
			name = dateWords(c.Name)
		}
		cw := with(w, "col", name)
		isNull := " WHERE " + ident(c.Name) + " IS NULL"
		add(&cand{cat: "null", shape: oneCell,
			texts: fillAll([]string{
				"How many {n} have no {col} recorded?",
				"How many {n} are missing a {col}?",
				"Count the {n} whose {col} is unknown.",
			}, cw),
			oracle: "SELECT COUNT(*) FROM " + tab + isNull,
			steps:  []step{{g.says("", "A missing value is NULL, so I test with IS NULL."), "SELECT COUNT(*) FROM " + tab + isNull}},
			answer: g.oneAnswer("{v} "+w["n"]+" have no "+name+" (NULL).", "The "+name+" is missing for {v} "+w["n"]+"."),
		})
		notNull := " WHERE " + ident(c.Name) + " IS NOT NULL"
		add(&cand{cat: "null", shape: oneCell,
			texts: fillAll([]string{
				"How many {n} have a {col} recorded?",
				"For how many {n} is the {col} known?",
			}, cw),
			oracle: "SELECT COUNT(*) FROM " + tab + notNull,
			steps:  []step{{"", "SELECT COUNT(*) FROM " + tab + notNull}},
			answer: g.oneAnswer("{v} "+w["n"]+" have a "+name+" recorded.", "The "+name+" is known for {v} "+w["n"]+"."),
		})
		if t.Key != nil {
			key := ident(t.Key.Name)
			add(&cand{cat: "null", shape: rowList,
				texts: fillAll([]string{
					"Which {n} have no {col}? Give their ids.",
					"List the ids of the {n} with a missing {col}.",
				}, cw),
				oracle: "SELECT " + key + " FROM " + tab + isNull,
				steps:  []step{{"", "SELECT " + key + " FROM " + tab + isNull + " ORDER BY " + key}},
				answer: g.listAnswer("{k} "+w["n"]+" have no "+name+": ids {ids}.", "The "+name+" is NULL for ids {ids}."),
			})
		}
	}
}

var months = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}

func (g *gen) dateCands(t *Table, add func(*cand)) {
	w := words(t)
	tab := ident(t.Name)
	for _, c := range t.Columns {
		if c.Kind != KindDate || c.Values == nil || len(c.Values) < 4 {
			continue
		}
		var dates []string
		pure := true
		for _, v := range c.Values {
			s := str(v.V)
			if !isoDate.MatchString(s) {
				dates = nil
				break
			}
			pure = pure && len(s) == 10
			dates = append(dates, s[:10])
		}
		if dates == nil {
			continue
		}
		dw := with(w, "col", dateWords(c.Name))
		col := ident(c.Name)
		n := len(dates)
		for _, d := range []string{dates[n/3], dates[(2*n)/3]} {
			for _, op := range []struct{ sym, word string }{{"<", "before"}, {">=", "on or after"}} {
				where := " WHERE " + col + " " + op.sym + " " + literal(d)
				ow := with(dw, "d", d, "op", op.word)
				add(&cand{cat: "date", shape: oneCell,
					texts: fillAll([]string{
						"How many {n} have a {col} {op} {d}?",
						"Count the {n} whose {col} is {op} {d}.",
						"How many {n} are dated {op} {d} by their {col}?",
					}, ow),
					oracle: "SELECT COUNT(*) FROM " + tab + where,
					steps:  []step{{"", "SELECT COUNT(*) FROM " + tab + where}},
					answer: g.oneAnswer("{v} "+w["n"]+" have a "+dw["col"]+" "+op.word+" "+d+".", "There are {v} "+w["n"]+" with a "+dw["col"]+" "+op.word+" "+d+"."),
				})
			}
		}
		years := map[int]bool{}
		for _, d := range dates {
			y, _ := strconv.Atoi(d[:4])
			if !years[y] {
				years[y] = true
				from, to := fmt.Sprintf("%04d-01-01", y), fmt.Sprintf("%04d-01-01", y+1)
				where := " WHERE " + col + " >= '" + from + "' AND " + col + " < '" + to + "'"
				add(&cand{cat: "date", shape: oneCell,
					texts: fillAll([]string{
						"How many {n} have a {col} in {y}?",
						"In {y}, how many {n} were recorded by {col}?",
						"Count the {n} whose {col} falls in the year {y}.",
					}, with(dw, "y", strconv.Itoa(y))),
					oracle: "SELECT COUNT(*) FROM " + tab + where,
					steps:  []step{{g.says("", "I compare against the year's bounds so that it works for dates and timestamps alike."), "SELECT COUNT(*) FROM " + tab + where}},
					answer: g.oneAnswer("{v} "+w["n"]+" have a "+dw["col"]+" in "+strconv.Itoa(y)+".", "In "+strconv.Itoa(y)+" there are {v} of them."),
				})
			}
		}
		if t.Key != nil {
			key := ident(t.Key.Name)
			seenMonth := map[string]bool{}
			for _, d := range dates {
				ym := d[:7]
				if seenMonth[ym] {
					continue
				}
				seenMonth[ym] = true
				tm, err := time.Parse("2006-01", ym)
				if err != nil {
					continue
				}
				from, to := tm.Format("2006-01-02"), tm.AddDate(0, 1, 0).Format("2006-01-02")
				where := " WHERE " + col + " >= '" + from + "' AND " + col + " < '" + to + "'"
				mw := with(dw, "m", months[tm.Month()-1]+" "+strconv.Itoa(tm.Year()))
				add(&cand{cat: "date", shape: rowList,
					texts: fillAll([]string{
						"Which {n} have a {col} in {m}? Give their ids.",
						"List the ids of the {n} whose {col} falls in {m}.",
					}, mw),
					oracle: "SELECT " + key + " FROM " + tab + where,
					steps:  []step{{"", "SELECT " + key + " FROM " + tab + where + " ORDER BY " + key}},
					answer: g.listAnswer("{k} "+w["n"]+" have a "+dw["col"]+" in "+mw["m"]+": ids {ids}.", "In "+mw["m"]+": ids {ids}."),
				})
			}
		}
		if pure {
			for _, agg := range []struct{ fn, word string }{{"MAX", "latest"}, {"MIN", "earliest"}} {
				add(&cand{cat: "date", shape: oneCell,
					texts: fillAll([]string{
						"What is the " + agg.word + " {col} among the {n}?",
						"When is the " + agg.word + " {col} of any {one}?",
						"Find the " + agg.word + " {col} in the {table} table.",
					}, dw),
					oracle: "SELECT CAST(" + agg.fn + "(" + col + ") AS TEXT) FROM " + tab,
					steps:  []step{{"", "SELECT " + agg.fn + "(" + col + ") FROM " + tab}},
					answer: g.oneAnswer("The "+agg.word+" "+dw["col"]+" is {v}.", "{v} is the "+agg.word+" "+dw["col"]+"."),
				})
			}
		}
	}
}

func (g *gen) emptyCands(t *Table, add func(*cand)) {
	w := words(t)
	tab := ident(t.Name)
	for _, c := range t.Columns {
		col := ident(c.Name)
		cw := with(w, "col", colWords(c.Name))
		if gs := groups(t, c); gs != nil {
			present := map[string]bool{}
			for _, gr := range gs {
				present[gr.norm] = true
			}
			var absent []string
			for _, a := range absentFor(gs) {
				if !present[a] {
					absent = append(absent, a)
				}
			}
			if len(absent) > 0 {
				a := pick(g.rng, absent)
				where := " WHERE LOWER(TRIM(" + col + ")) = " + literal(strings.ToLower(a))
				add(&cand{cat: "empty", shape: oneCell, empty: true,
					texts: fillAll([]string{
						"How many {n} have {col} '{v}'?",
						"How many {n} are {v}?",
						"Count the {n} with a {col} of {v}.",
					}, with(cw, "v", a)),
					oracle:  "SELECT COUNT(*) FROM " + tab + where,
					steps:   []step{{"", "SELECT COUNT(*) FROM " + tab + where}},
					answer:  g.oneAnswer("{v}: no "+singular(t.Name)+" has "+cw["col"]+" '"+a+"'.", "There are {v} such "+w["n"]+"; '"+a+"' is not among the stored "+cw["col"]+" values."),
					witness: setOne(t, col, literal(a)),
				})
			}
		}
		if t.Key != nil && c.Kind == KindDate && c.Values != nil && len(c.Values) > 0 {
			last := str(c.Values[len(c.Values)-1].V)
			if len(last) >= 4 {
				y, err := strconv.Atoi(last[:4])
				if err == nil {
					d := fmt.Sprintf("%04d-01-01", y+1)
					key := ident(t.Key.Name)
					where := " WHERE " + col + " >= " + literal(d)
					add(&cand{cat: "empty", shape: rowList, empty: true,
						texts: fillAll([]string{
							"Which {n} have a {col} on or after {d}? Give their ids.",
							"List the ids of the {n} whose {col} is {d} or later.",
						}, with(w, "col", dateWords(c.Name), "d", d)),
						oracle:  "SELECT " + key + " FROM " + tab + where,
						steps:   []step{{"", "SELECT " + key + " FROM " + tab + where + " ORDER BY " + key}},
						answer:  g.listAnswer("None: no "+singular(t.Name)+" has a "+dateWords(c.Name)+" on or after "+d+" (the query returns no rows).", "There are no such "+w["n"]+"; the result is empty."),
						witness: setOne(t, col, literal(d)),
					})
				}
			}
		}
		if (c.Kind == KindInteger || c.Kind == KindNumber) && c != t.Key && !g.isFK(t, c) && c.Values != nil && len(c.Values) >= 2 {
			mx, _ := asFloat(c.Values[len(c.Values)-1].V)
			x := int64(mx)*2 + 10
			where := " WHERE " + col + " > " + strconv.FormatInt(x, 10)
			add(&cand{cat: "empty", shape: oneCell, empty: true,
				texts: fillAll([]string{
					"How many {n} have a {col} above {x}?",
					"Count the {n} whose {col} exceeds {x}.",
				}, with(cw, "x", strconv.FormatInt(x, 10))),
				oracle:  "SELECT COUNT(*) FROM " + tab + where,
				steps:   []step{{"", "SELECT COUNT(*) FROM " + tab + where}},
				answer:  g.oneAnswer("{v}: no "+singular(t.Name)+" has a "+cw["col"]+" above "+strconv.FormatInt(x, 10)+".", "There are {v} of them."),
				witness: setOne(t, col, strconv.FormatInt(x+1, 10)),
			})
		}
	}
}

// setOne is the witness_sql of a question whose answer is empty: it sets
// col (an identifier) to value (SQL) in the table's row with the lowest key,
// so that the question's answer is that row; in a table without a key, in
// the rows whose col holds its lowest value.
func setOne(t *Table, col, value string) []string {
	tab, k := ident(t.Name), col
	if t.Key != nil {
		k = ident(t.Key.Name)
	}
	return []string{"UPDATE " + tab + " SET " + col + " = " + value + " WHERE " + k + " = (SELECT MIN(" + k + ") FROM " + tab + ")"}
}

func alias(t string, other string) string {
	a := strings.ToLower(t[:1])
	if a < "a" || a > "z" {
		a = "t"
	}
	if strings.EqualFold(t[:1], other[:1]) && t != other {
		return a + "1"
	}
	return a
}

func (g *gen) joinCands(fk ForeignKey, add func(*cand)) {
	child, parent := g.s.Table(fk.Table), g.s.Table(fk.RefTable)
	if child == nil || parent == nil || child.Rows == 0 || parent.Rows == 0 {
		return
	}
	ca, pa := alias(child.Name, parent.Name), alias(parent.Name, child.Name)
	if child == parent {
		ca, pa = "c", "p"
	}
	if ca == pa {
		pa = pa + "2"
	}
	from := ident(child.Name) + " AS " + ca + " JOIN " + ident(parent.Name) + " AS " + pa + " ON " + pa + "." + ident(fk.RefColumn) + " = " + ca + "." + ident(fk.Column)
	cn, pn, p1 := plural(child.Name), plural(parent.Name), singular(parent.Name)
	base := map[string]string{"cn": cn, "c1": singular(child.Name), "pn": pn, "p1": p1}
	if child == parent {
		g.selfJoinCands(fk, child, add)
		return
	}
	// Children of parents with a category value.
	for _, c := range parent.Columns {
		for _, gr := range groups(parent, c) {
			cond := pa + "." + ident(c.Name) + " = " + literal(gr.forms[0])
			v := gr.forms[0]
			if !gr.clean() {
				cond = "LOWER(TRIM(" + pa + "." + ident(c.Name) + ")) = " + literal(gr.norm)
				v = gr.norm
			}
			vw := with(base, "col", colWords(c.Name), "v", v)
			sql := "SELECT COUNT(*) FROM " + from + " WHERE " + cond
			add(&cand{cat: "join", shape: oneCell,
				texts: fillAll([]string{
					"How many {cn} belong to {pn} whose {col} is '{v}'?",
					"Count the {cn} of {pn} with {col} '{v}'.",
					"How many {cn} are linked to a {p1} with {col} {v}?",
				}, vw),
				oracle: sql,
				steps:  []step{{g.says("", child.Name+"."+fk.Column+" references "+parent.Name+"."+fk.RefColumn+", so I join on it."), sql}},
				answer: g.oneAnswer("{v} "+cn+" belong to "+pn+" with "+vw["col"]+" '"+v+"'.", "There are {v} such "+cn+"."),
			})
		}
	}
	// Parents without children.
	none := " WHERE NOT EXISTS (SELECT 1 FROM " + ident(child.Name) + " AS " + ca + " WHERE " + ca + "." + ident(fk.Column) + " = " + pa + "." + ident(fk.RefColumn) + ")"
	add(&cand{cat: "join", shape: oneCell,
		texts: fillAll([]string{
			"How many {pn} have no {cn} at all?",
			"Count the {pn} that do not have a single {c1}.",
			"How many {pn} never appear in {cn}?",
		}, base),
		oracle: "SELECT COUNT(*) FROM " + ident(parent.Name) + " AS " + pa + none,
		steps:  []step{{"", "SELECT COUNT(*) FROM " + ident(parent.Name) + " AS " + pa + none}},
		answer: g.oneAnswer("{v} "+pn+" have no "+cn+".", "There are {v} "+pn+" without any "+singular(child.Name)+"."),
	})
	if parent.Key != nil {
		pk := pa + "." + ident(parent.Key.Name)
		add(&cand{cat: "join", shape: rowList,
			texts: fillAll([]string{
				"Which {pn} have no {cn}? List their ids.",
				"Give the ids of the {pn} without any {c1}.",
			}, base),
			oracle: "SELECT " + pk + " FROM " + ident(parent.Name) + " AS " + pa + none,
			steps:  []step{{"", "SELECT " + pk + " FROM " + ident(parent.Name) + " AS " + pa + none + " ORDER BY " + pk}},
			answer: g.listAnswer("{k} "+pn+" have no "+cn+": ids {ids}.", "The "+pn+" without "+cn+" are ids {ids}."),
		})
	}
	// Children of one named parent.
	if lab := parent.Label; lab != nil && child.Key != nil {
		vals := lab.Values
		idx := g.rng.Perm(len(vals))
		if len(idx) > 12 {
			idx = idx[:12]
		}
		for _, i := range idx {
			x := str(vals[i].V)
			lw := with(base, "label", colWords(lab.Name), "x", x)
			cond := " WHERE " + pa + "." + ident(lab.Name) + " = " + literal(x)
			ck := ca + "." + ident(child.Key.Name)
			listSQL := "SELECT " + ck + " FROM " + from + cond
			listTexts := fillAll([]string{
				"List the ids of the {cn} of the {p1} whose {label} is '{x}'.",
				"Which {cn} belong to {p1} '{x}'? Give their ids.",
			}, lw)
			find := &lookup{
				say: "First I find the " + colWords(fk.RefColumn) + " of the " + p1 + " '" + x + "'.",
				sql: "SELECT " + ident(fk.RefColumn) + " FROM " + ident(parent.Name) + " WHERE " + ident(lab.Name) + " = " + literal(x),
			}
			byKey := ident(child.Name) + " WHERE " + ident(fk.Column) + " = "
			add(&cand{cat: "join", shape: rowList,
				texts: listTexts, oracle: listSQL,
				steps:  []step{{"", listSQL + " ORDER BY " + ck}},
				answer: g.listAnswer("{k} "+cn+" belong to "+x+": ids {ids}.", "The "+cn+" of "+x+" are ids {ids}."),
				lookup: find.then(func(key string) string {
					k := ident(child.Key.Name)
					return "SELECT " + k + " FROM " + byKey + key + " ORDER BY " + k
				}),
			})
			add(&cand{cat: "empty", shape: rowList, empty: true,
				texts: listTexts, oracle: listSQL,
				steps:   []step{{"", listSQL + " ORDER BY " + ck}},
				answer:  g.listAnswer("None: "+x+" has no "+cn+" (the query returns no rows).", "There are no "+cn+" for "+x+"."),
				witness: setOne(child, ident(fk.Column), "(SELECT MIN("+ident(fk.RefColumn)+") FROM "+ident(parent.Name)+" WHERE "+ident(lab.Name)+" = "+literal(x)+")"),
			})
			countSQL := "SELECT COUNT(*) FROM " + from + cond
			add(&cand{cat: "join", shape: oneCell,
				texts: fillAll([]string{
					"How many {cn} does the {p1} '{x}' have?",
					"How many {cn} are there for the {p1} with {label} '{x}'?",
				}, lw),
				oracle: countSQL, steps: []step{{"", countSQL}},
				answer: g.oneAnswer(x+" has {v} "+cn+".", "There are {v} "+cn+" for "+x+"."),
				lookup: find.then(func(key string) string { return "SELECT COUNT(*) FROM " + byKey + key }),
			})
		}
	}
}

// absentFor returns values shaped like a column's stored ones (short codes
// or lower-case words) to ask about when no row holds them; nil when the
// values have no such shape (names, free text).
func absentFor(gs []group) []string {
	codes, words := true, true
	for _, gr := range gs {
		f := strings.TrimSpace(gr.forms[0])
		codes = codes && len(f) >= 2 && len(f) <= 3 && strings.ToUpper(f) == f
		for _, r := range gr.norm {
			words = words && (r >= 'a' && r <= 'z' || r == ' ' || r == '-' || r == '_')
		}
		words = words && len(strings.Fields(gr.norm)) <= 2
	}
	switch {
	case codes:
		return absentCodes
	case words:
		return absentWords
	}
	return nil
}

// selfJoinCands asks about a table that references itself (an employee's
// manager): the foreign key's column names the role.
func (g *gen) selfJoinCands(fk ForeignKey, t *Table, add func(*cand)) {
	role := humanize(strings.TrimSuffix(strings.TrimSuffix(fk.Column, "_id"), "_by"))
	n, one := plural(t.Name), singular(t.Name)
	tab := ident(t.Name)
	from := tab + " AS c JOIN " + tab + " AS p ON p." + ident(fk.RefColumn) + " = c." + ident(fk.Column)
	w := map[string]string{"n": n, "one": one, "role": role}
	none := " WHERE NOT EXISTS (SELECT 1 FROM " + tab + " AS c WHERE c." + ident(fk.Column) + " = p." + ident(fk.RefColumn) + ")"
	add(&cand{cat: "join", shape: oneCell,
		texts: fillAll([]string{
			"How many {n} are not the {role} of any other {one}?",
			"Count the {n} that nobody has as their {role}.",
		}, w),
		oracle: "SELECT COUNT(*) FROM " + tab + " AS p" + none,
		steps:  []step{{g.says("", fk.Column+" points back into "+t.Name+", so I look for rows that no other row references."), "SELECT COUNT(*) FROM " + tab + " AS p" + none}},
		answer: g.oneAnswer("{v} "+n+" are nobody's "+role+".", "There are {v} "+n+" that no "+one+" has as "+role+"."),
	})
	lab := t.Label
	if lab == nil || t.Key == nil {
		return
	}
	idx := g.rng.Perm(len(lab.Values))
	if len(idx) > 12 {
		idx = idx[:12]
	}
	for _, i := range idx {
		x := str(lab.Values[i].V)
		lw := with(w, "x", x)
		cond := " WHERE p." + ident(lab.Name) + " = " + literal(x)
		ck := "c." + ident(t.Key.Name)
		listSQL := "SELECT " + ck + " FROM " + from + cond
		texts := fillAll([]string{
			"List the ids of the {n} whose {role} is '{x}'.",
			"Which {n} have {x} as their {role}? Give their ids.",
		}, lw)
		for _, empty := range []bool{false, true} {
			cat, ans := "join", g.listAnswer("{k} "+n+" have "+x+" as their "+role+": ids {ids}.", "The "+n+" whose "+role+" is "+x+" are ids {ids}.")
			var witness []string
			if empty {
				cat, ans = "empty", g.listAnswer("None: no "+one+" has "+x+" as "+role+" (the query returns no rows).")
				witness = setOne(t, ident(fk.Column), "(SELECT MIN("+ident(fk.RefColumn)+") FROM "+tab+" WHERE "+ident(lab.Name)+" = "+literal(x)+")")
			}
			add(&cand{cat: cat, shape: rowList, empty: empty, texts: texts, oracle: listSQL,
				steps: []step{{"", listSQL + " ORDER BY " + ck}}, answer: ans, witness: witness})
		}
		countSQL := "SELECT COUNT(*) FROM " + from + cond
		add(&cand{cat: "join", shape: oneCell,
			texts: fillAll([]string{
				"How many {n} have '{x}' as their {role}?",
				"For how many {n} is {x} the {role}?",
			}, lw),
			oracle: countSQL, steps: []step{{"", countSQL}},
			answer: g.oneAnswer("{v} "+n+" have "+x+" as their "+role+".", x+" is the "+role+" of {v} "+n+"."),
		})
	}
}

// countable reports whether a column's words name a count of things
// ("pages", "seats"), which reads "more than 500 pages".
func countable(words string) bool {
	return strings.HasSuffix(words, "s") && !strings.HasSuffix(words, "ss") && !strings.HasSuffix(words, "us") && !strings.HasSuffix(words, "is")
}
