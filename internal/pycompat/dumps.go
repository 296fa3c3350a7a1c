package pycompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Quote is Python's json.dumps of a str: \" \\ \n \r \t \b \f, other
// control characters as \u00XX, everything else raw, or, with ensureASCII
// (json.dumps' default), every character outside ' '..'~' as \uXXXX
// (surrogate pairs above U+FFFF). Invalid UTF-8 reads as U+FFFD.
func Quote(s string, ensureASCII bool) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (ensureASCII && r > 0x7e && r <= 0xffff):
				fmt.Fprintf(&b, `\u%04x`, r)
			case ensureASCII && r > 0xffff:
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FloatRepr formats f as Python's float repr (what json.dumps writes):
// the shortest round-tripping digits, in exponent form when the decimal
// exponent is below -4 or at least 16, otherwise positional with at least
// one decimal ("1.0"); Infinity, -Infinity and NaN as json.dumps allows them.
func FloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d[.ddd]e±XX, Python's exponent form exactly
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// Dumps re-serializes JSON as Python's json.dumps(json.loads(raw)) with
// default arguments: separators ", " and ": ", ensure_ascii, key order kept
// (numbers are written as raw has them).
func Dumps(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	// stack of containers: true for object; count of members written
	type frame struct {
		obj   bool
		n     int
		inKey bool // object: next token is a key
	}
	var stack []frame
	for {
		t, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			return "", fmt.Errorf("re-serialize schema: %w", err)
		}
		if d, ok := t.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			b.WriteRune(rune(d))
			if len(stack) > 0 && stack[len(stack)-1].obj {
				stack[len(stack)-1].inKey = true
			}
			continue
		}
		if len(stack) > 0 {
			f := &stack[len(stack)-1]
			switch {
			case f.obj && f.inKey:
				if f.n > 0 {
					b.WriteString(", ")
				}
				f.n++
			case f.obj:
				b.WriteString(": ")
			default:
				if f.n > 0 {
					b.WriteString(", ")
				}
				f.n++
			}
		}
		isKey := len(stack) > 0 && stack[len(stack)-1].obj && stack[len(stack)-1].inKey
		switch v := t.(type) {
		case json.Delim:
			b.WriteRune(rune(v))
			if len(stack) > 0 && stack[len(stack)-1].obj {
				stack[len(stack)-1].inKey = true // after this value, a key follows
			}
			stack = append(stack, frame{obj: v == '{', inKey: v == '{'})
			continue
		case string:
			b.WriteString(Quote(v, true))
		case json.Number:
			b.WriteString(string(v))
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case nil:
			b.WriteString("null")
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].inKey = !isKey
		}
	}
	return b.String(), nil
}
