package taskgen

import (
	"strconv"
	"strings"
)

// Edge cases: questions whose natural first query (the one an ordinary
// task's golden would write, from the question's own words) fails. They get
// no golden trajectory; realizeEdge checks the trap against the database.

func (g *gen) edgeCands(t *Table, add func(*cand)) {
	w := words(t)
	tab := ident(t.Name)
	var key string
	if t.Key != nil {
		key = ident(t.Key.Name)
	}
	for _, c := range t.Columns {
		col := ident(c.Name)
		cw := with(w, "col", colWords(c.Name))
		gs := groups(t, c)
		for _, gr := range gs {
			norm := " WHERE LOWER(TRIM(" + col + ")) = " + literal(gr.norm)
			if !gr.clean() {
				// Several spellings: an exact match on the question's form counts too few.
				for _, v := range casings(gr.norm) {
					exact := " WHERE " + col + " = " + literal(v)
					vw := with(cw, "v", v)
					add(&cand{cat: "case-variants", shape: oneCell,
						texts: fillAll([]string{
							"How many {n} have {col} {v}?",
							"How many {n} are there with a {col} of '{v}'?",
							"Count the {n} whose {col} is {v}, however it was typed.",
						}, vw),
						oracle: "SELECT COUNT(*) FROM " + tab + norm, trapSQL: "SELECT COUNT(*) FROM " + tab + exact, trapWant: trapWrong,
					})
					if key != "" {
						add(&cand{cat: "case-variants", shape: rowList,
							texts: fillAll([]string{
								"Which {n} have {col} {v}? Give their ids.",
								"List the ids of all {n} whose {col} is '{v}', in any spelling.",
							}, vw),
							oracle: "SELECT " + key + " FROM " + tab + norm, trapSQL: "SELECT " + key + " FROM " + tab + exact, trapWant: trapWrong,
						})
					}
				}
			} else if key != "" {
				// One clean spelling, asked in another case: an exact match comes back empty.
				for _, v := range casings(gr.norm) {
					if v == gr.forms[0] {
						continue
					}
					add(&cand{cat: "empty-first", shape: rowList,
						texts: fillAll([]string{
							"List the ids of the {n} whose {col} is '{v}'.",
							"Which {n} have {col} {v}? Give their ids.",
						}, with(cw, "v", v)),
						oracle: "SELECT " + key + " FROM " + tab + norm, trapSQL: "SELECT " + key + " FROM " + tab + " WHERE " + col + " = " + literal(v), trapWant: trapEmpty,
					})
				}
			}
			// NULLs: "other than v" must count the rows without a value too.
			if c.Nulls > 0 && gr.clean() {
				v := gr.forms[0]
				vw := with(cw, "v", v)
				add(&cand{cat: "nulls", shape: oneCell,
					texts: fillAll([]string{
						"How many {n} have a {col} other than '{v}', counting those with no {col} at all?",
						"Count the {n} whose {col} is not '{v}', including the ones where it is missing.",
					}, vw),
					oracle:  "SELECT COUNT(*) FROM " + tab + " WHERE " + col + " IS NULL OR " + col + " <> " + literal(v),
					trapSQL: "SELECT COUNT(*) FROM " + tab + " WHERE " + col + " <> " + literal(v), trapWant: trapWrong,
				})
			}
			// A column named by a synonym: the natural query names a column that does not exist.
			where, v := gr.match(col)
			for _, syn := range columnSynonyms[colWords(c.Name)] {
				add(&cand{cat: "renamed-column", shape: oneCell,
					texts: fillAll([]string{
						"How many {n} have a {syn} of '{v}'?",
						"Count the {n} whose {syn} is {v}.",
					}, with(w, "syn", syn, "v", v)),
					oracle:  "SELECT COUNT(*) FROM " + tab + where,
					trapSQL: "SELECT COUNT(*) FROM " + tab + " WHERE " + ident(snake(syn)) + " = " + literal(v), trapWant: trapError,
				})
			}
			// A column named by a near variant of its name.
			for _, la := range lookAlikes(t, c) {
				add(&cand{cat: "look-alike-column", shape: oneCell,
					texts: fillAll([]string{
						"How many {n} have {la} '{v}'?",
						"Count the {n} with a {la} of {v}.",
					}, with(w, "la", la, "v", v)),
					oracle:  "SELECT COUNT(*) FROM " + tab + where,
					trapSQL: "SELECT COUNT(*) FROM " + tab + " WHERE " + ident(snake(la)) + " = " + literal(v), trapWant: trapError,
				})
			}
		}
		if c.Kind == KindBool && c.Values != nil && len(c.Values) == 2 {
			for _, la := range lookAlikes(t, c) {
				add(&cand{cat: "look-alike-column", shape: oneCell,
					texts: fillAll([]string{
						"How many {n} are {la}?",
						"Count the {la} {n}.",
					}, with(w, "la", la)),
					oracle:  "SELECT COUNT(*) FROM " + tab + " WHERE " + col + " = TRUE",
					trapSQL: "SELECT COUNT(*) FROM " + tab + " WHERE " + ident(snake(la)) + " = TRUE", trapWant: trapError,
				})
			}
		}
		if c.Kind == KindDate && c.Values != nil {
			for _, la := range lookAlikes(t, c) {
				y := firstYear(c)
				if y == "" {
					break
				}
				bounds := func(col string) string {
					return " WHERE " + col + " >= '" + y + "-01-01' AND " + col + " < '" + nextYear(y) + "-01-01'"
				}
				texts := []string{"How many {n} have their {la} in {y}?", "Count the {n} whose {la} falls in {y}."}
				if !strings.Contains(la, " ") && strings.HasSuffix(la, "ed") { // placed, created: a verb
					texts = []string{"How many {n} were {la} in {y}?", "Count the {n} {la} in {y}."}
				}
				add(&cand{cat: "look-alike-column", shape: oneCell,
					texts:   fillAll(texts, with(w, "la", la, "y", y)),
					oracle:  "SELECT COUNT(*) FROM " + tab + bounds(col),
					trapSQL: "SELECT COUNT(*) FROM " + tab + bounds(ident(snake(la))), trapWant: trapError,
				})
			}
		}
	}
	// A table named by another word: the natural query fails with no such table.
	var others []string
	for _, syn := range tableSynonyms[singular(t.Name)] {
		others = append(others, pluralize(syn))
	}
	for _, syn := range others {
		add(&cand{cat: "sql-error", shape: oneCell,
			texts: fillAll([]string{
				"How many {syns} are in the database?",
				"What is the number of {syns} on record?",
				"Count all {syns}.",
			}, with(w, "syns", syn)),
			oracle: sel(t), trapSQL: "SELECT COUNT(*) FROM " + ident(snake(syn)), trapWant: trapError,
		})
		for _, c := range t.Columns {
			for _, gr := range groups(t, c) {
				where, v := gr.match(ident(c.Name))
				add(&cand{cat: "sql-error", shape: oneCell,
					texts: fillAll([]string{
						"How many {syns} have {col} '{v}'?",
						"Count the {syns} whose {col} is {v}.",
					}, with(w, "syns", syn, "col", colWords(c.Name), "v", v)),
					oracle:  "SELECT COUNT(*) FROM " + tab + where,
					trapSQL: "SELECT COUNT(*) FROM " + ident(snake(syn)) + " WHERE " + ident(c.Name) + " = " + literal(v), trapWant: trapError,
				})
			}
		}
	}
	// "The customer table" for a table named customers.
	if one := snake(singular(t.Name)); one != t.Name {
		add(&cand{cat: "sql-error", shape: oneCell,
			texts: fillAll([]string{
				"How many rows does the {one} table have?",
				"Count the rows of the {one} table.",
			}, with(w, "one", one)),
			oracle: sel(t), trapSQL: "SELECT COUNT(*) FROM " + ident(one), trapWant: trapError,
		})
	}
}

// snake writes words as an identifier: "account holder" -> "account_holder".
func snake(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), " ", "_") }

// lookAlikeAffixes are the words a question drops from a column's name.
var lookAlikeAffixes = map[string]bool{"is": true, "has": true, "at": true, "on": true, "code": true, "flag": true, "name": true, "value": true}

// lookAlikes returns the near variants of a column's name a question may
// use for it (is_active -> active, last_login_at -> last login): its words
// without a leading or trailing affix, when no column of t has that name.
func lookAlikes(t *Table, c *Column) []string {
	ws := strings.Fields(colWords(c.Name))
	if len(ws) < 2 {
		return nil
	}
	var out []string
	try := func(words []string) {
		la := strings.Join(words, " ")
		if t.Column(snake(la)) == nil && len(la) > 2 {
			out = append(out, la)
		}
	}
	if lookAlikeAffixes[ws[0]] {
		try(ws[1:])
	}
	if lookAlikeAffixes[ws[len(ws)-1]] {
		try(ws[:len(ws)-1])
	}
	return out
}

// firstYear is the year of a date column's median value ("" when its
// values are not ISO dates).
func firstYear(c *Column) string {
	s := str(c.Values[len(c.Values)/2].V)
	if !isoDate.MatchString(s) {
		return ""
	}
	return s[:4]
}

func nextYear(y string) string {
	n, _ := strconv.Atoi(y)
	return strconv.Itoa(n + 1)
}
