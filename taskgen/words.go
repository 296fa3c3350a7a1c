package taskgen

import (
	"math/rand/v2"
	"regexp"
	"strings"
)

// words turns schema names into the words a question uses.

// humanize writes an identifier as words: "last_login_at" -> "last login at".
func humanize(name string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == ' ':
			b.WriteByte(' ')
			prevLower = false
			continue
		case r >= 'A' && r <= 'Z':
			if prevLower {
				b.WriteByte(' ')
			}
			r += 'a' - 'A'
			prevLower = false
		default:
			prevLower = r >= 'a' && r <= 'z'
		}
		b.WriteRune(r)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// plural is how questions name a table's rows: "order_items" -> "order items".
func plural(table string) string {
	h := humanize(table)
	if strings.HasSuffix(h, "s") {
		return h
	}
	return h + " records"
}

// singular is one row of a table: "order_items" -> "order item".
func singular(table string) string {
	h := humanize(table)
	switch {
	case strings.HasSuffix(h, "ies"):
		return h[:len(h)-3] + "y"
	case strings.HasSuffix(h, "sses"), strings.HasSuffix(h, "xes"), strings.HasSuffix(h, "ches"), strings.HasSuffix(h, "shes"):
		return h[:len(h)-2]
	case strings.HasSuffix(h, "ss"):
		return h
	case strings.HasSuffix(h, "s"):
		return h[:len(h)-1]
	}
	return h + " record"
}

// pluralize makes a singular noun phrase plural.
func pluralize(s string) string {
	switch {
	case strings.HasSuffix(s, "y") && !strings.HasSuffix(s, "ay") && !strings.HasSuffix(s, "ey") && !strings.HasSuffix(s, "oy"):
		return s[:len(s)-1] + "ies"
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	}
	return s + "s"
}

// colWords is how a question names a column: "account_status" -> "account status".
func colWords(col string) string { return humanize(col) }

// dateWords names a date column: "created_at" -> "created date", "due_date" -> "due date".
func dateWords(col string) string {
	h := humanize(col)
	for _, suf := range []string{" at", " on", " date", " time", " ts"} {
		if strings.HasSuffix(h, suf) && len(h) > len(suf) {
			return strings.TrimSuffix(h, suf) + " date"
		}
	}
	if h == "date" {
		return h
	}
	return h + " date"
}

// tableSynonyms are other words for common table nouns (singular).
var tableSynonyms = map[string][]string{
	"customer": {"client", "buyer", "account holder", "patron"},
	"client":   {"customer"},
	"order":    {"purchase", "sale"},
	"user":     {"account", "member"},
	"member":   {"patron", "borrower", "subscriber"},
	"product":  {"item", "article"},
	"item":     {"product", "article"},
	"book":     {"title", "volume"},
	"loan":     {"checkout", "borrowing", "lending"},
	"author":   {"writer"},
	"employee": {"staff member", "worker"},
	"invoice":  {"bill"},
	"payment":  {"transaction"},
	"ticket":   {"issue", "case"},
	"student":  {"pupil", "learner"},
	"course":   {"class"},
	"supplier": {"vendor"},
	"vendor":   {"supplier"},
	"movie":    {"film"},
	"film":     {"movie"},
	"city":     {"town"},
	"project":  {"initiative"},
	"task":     {"job", "to-do"},
	"review":   {"rating"},
	"shipment": {"delivery"},
}

// columnSynonyms are other words for common column names (humanized).
var columnSynonyms = map[string][]string{
	"status":    {"state", "standing", "condition"},
	"state":     {"status", "stage"},
	"tier":      {"level", "plan", "membership level"},
	"genre":     {"category", "kind of book"},
	"category":  {"kind", "type", "class"},
	"type":      {"kind", "category"},
	"country":   {"nation", "country code"},
	"city":      {"town", "home town"},
	"level":     {"tier", "grade"},
	"role":      {"position", "job title"},
	"priority":  {"urgency", "importance"},
	"plan":      {"tier", "subscription"},
	"kind":      {"type", "category"},
	"region":    {"area", "territory"},
	"currency":  {"money unit"},
	"stage":     {"phase", "step"},
	"color":     {"colour"},
	"brand":     {"make", "label"},
	"language":  {"tongue"},
	"segment":   {"group", "bracket"},
	"source":    {"origin", "channel"},
	"channel":   {"source", "medium"},
	"severity":  {"seriousness", "impact"},
	"placed at": {"purchase date"},
}

// absentWords are plausible category values to ask about when none of
// the rows holds them (empty results).
var absentWords = []string{"archived", "deleted", "banned", "expired", "draft", "refunded", "on hold",
	"retired", "blocked", "cancelled", "unknown", "legacy", "trial", "vip", "sandbox"}

// absentCodes are short upper-case codes to ask about when a column holds codes.
var absentCodes = []string{"NL", "JP", "IT", "ES", "CA", "MX", "SE", "KR", "XX", "ZZ"}

// pick returns one element of xs chosen by rng.
func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// fill replaces {name} placeholders in tmpl.
func fill(tmpl string, kv map[string]string) string {
	out := tmpl
	for k, v := range kv {
		out = strings.ReplaceAll(out, "{"+k+"}", v)
	}
	return upperFirst(article(out))
}

var aVowel = regexp.MustCompile(`\b([Aa]) ([aeiouAEIOU])`)

// article writes "an" before a vowel: "a amount" -> "an amount".
func article(s string) string { return aVowel.ReplaceAllString(s, "${1}n $2") }

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	if c := s[0]; c >= 'a' && c <= 'z' {
		return string(c-'a'+'A') + s[1:]
	}
	return s
}

// casings returns spellings of a value in other letter cases than the
// database's forms, for questions whose wording differs from the data.
func casings(norm string) []string {
	title := upperFirst(norm)
	return []string{norm, title, strings.ToUpper(norm)}
}

// joinList writes "a, b and c".
func joinList(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
