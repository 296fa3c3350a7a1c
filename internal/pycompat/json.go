package pycompat

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind is the Python type a JSON value decodes to.
type Kind uint8

// The kinds of Value, named by their Python types.
const (
	NoneKind Kind = iota
	BoolKind
	IntKind
	FloatKind
	StrKind
	ListKind
	DictKind
)

var kindNames = [...]string{"NoneType", "bool", "int", "float", "str", "list", "dict"}

// TypeName is the Python type name (as in "'list' object has no attribute").
func (k Kind) TypeName() string { return kindNames[k] }

// Value is a decoded JSON value. Str holds a str's WTF-8 text, or a
// number's literal text. A dict keeps every member in order, duplicates
// included; Get applies Python's last-wins rule.
type Value struct {
	Kind    Kind
	Str     string
	Bool    bool
	Items   []Value  // list elements
	Keys    []string // dict keys, in order, duplicates included
	Members []Value  // dict values, parallel to Keys
}

// Get is dict.get(key): the value of the last member named key.
func (v *Value) Get(key string) (*Value, bool) {
	for i := len(v.Keys) - 1; i >= 0; i-- {
		if v.Keys[i] == key {
			return &v.Members[i], true
		}
	}
	return nil, false
}

// ErrorClass is the Python exception class json.loads raises.
type ErrorClass string

// The exceptions json.loads raises on a str.
const (
	JSONDecodeError ErrorClass = "JSONDecodeError" // malformed JSON (a ValueError subclass)
	ValueError      ErrorClass = "ValueError"      // an integer over sys.get_int_max_str_digits() digits
	RecursionError  ErrorClass = "RecursionError"  // nesting deeper than the recursion limit allows
)

// Error is an exception json.loads would raise.
type Error struct {
	Class ErrorClass
	Msg   string
}

func (e *Error) Error() string { return string(e.Class) + ": " + e.Msg }

// IntMaxStrDigits is CPython's default sys.get_int_max_str_digits().
const IntMaxStrDigits = 4300

// DefaultMaxDepth is the deepest nesting of arrays and objects that
// json.loads decodes under CPython 3.11's default recursion limit (1000)
// when called as compute_mcp_reward calls it from a script's main function
// (6 Python frames deep); one level more raises RecursionError. It depends
// on the caller's stack depth, so it is a parameter.
const DefaultMaxDepth = 993

// Loads is json.loads(s) for a str s, with the default decoder (strict,
// the C scanner). MaxDepth is DefaultMaxDepth.
func Loads(s string) (Value, error) { return LoadsDepth(s, DefaultMaxDepth) }

// LoadsDepth is Loads with a given maximum nesting depth.
func LoadsDepth(s string, maxDepth int) (Value, error) {
	if strings.HasPrefix(s, "\ufeff") {
		return Value{}, &Error{JSONDecodeError, "Unexpected UTF-8 BOM (decode using utf-8-sig)"}
	}
	d := decoder{s: s, maxDepth: maxDepth}
	i := d.ws(0)
	v, end, err := d.value(i, 0)
	if err != nil {
		return Value{}, err
	}
	if end = d.ws(end); end != len(s) {
		return Value{}, &Error{JSONDecodeError, "Extra data"}
	}
	return v, nil
}

type decoder struct {
	s        string
	maxDepth int
}

func (d *decoder) ws(i int) int {
	for i < len(d.s) {
		switch d.s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func decodeErr(msg string) error { return &Error{JSONDecodeError, msg} }

// value is scan_once: a value starting exactly at i.
func (d *decoder) value(i, depth int) (Value, int, error) {
	s := d.s
	if i >= len(s) {
		return Value{}, 0, decodeErr("Expecting value")
	}
	switch c := s[i]; {
	case c == '"':
		str, end, err := d.str(i + 1)
		return Value{Kind: StrKind, Str: str}, end, err
	case c == '{' || c == '[':
		if depth >= d.maxDepth {
			what := "object"
			if c == '[' {
				what = "array"
			}
			return Value{}, 0, &Error{RecursionError, "maximum recursion depth exceeded while decoding a JSON " + what + " from a unicode string"}
		}
		if c == '{' {
			return d.object(i+1, depth+1)
		}
		return d.array(i+1, depth+1)
	case c == 'n' && strings.HasPrefix(s[i:], "null"):
		return Value{Kind: NoneKind}, i + 4, nil
	case c == 't' && strings.HasPrefix(s[i:], "true"):
		return Value{Kind: BoolKind, Bool: true}, i + 4, nil
	case c == 'f' && strings.HasPrefix(s[i:], "false"):
		return Value{Kind: BoolKind}, i + 5, nil
	case c == 'N' && strings.HasPrefix(s[i:], "NaN"):
		return Value{Kind: FloatKind, Str: "NaN"}, i + 3, nil
	case c == 'I' && strings.HasPrefix(s[i:], "Infinity"):
		return Value{Kind: FloatKind, Str: "Infinity"}, i + 8, nil
	case c == '-' && strings.HasPrefix(s[i:], "-Infinity"):
		return Value{Kind: FloatKind, Str: "-Infinity"}, i + 9, nil
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number(i)
	}
	return Value{}, 0, decodeErr("Expecting value")
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number is _match_number_unicode.
func (d *decoder) number(start int) (Value, int, error) {
	s := d.s
	i := start
	if s[i] == '-' {
		i++
		if i >= len(s) {
			return Value{}, 0, decodeErr("Expecting value")
		}
	}
	switch {
	case s[i] >= '1' && s[i] <= '9':
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	case s[i] == '0':
		i++
	default:
		return Value{}, 0, decodeErr("Expecting value")
	}
	float := false
	if i+1 < len(s) && s[i] == '.' && isDigit(s[i+1]) {
		float = true
		i += 2
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i+1 < len(s) && (s[i] == 'e' || s[i] == 'E') {
		e := i
		i++
		if i+1 < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if isDigit(s[i-1]) {
			float = true
		} else {
			i = e
		}
	}
	lit := s[start:i]
	if float {
		return Value{Kind: FloatKind, Str: lit}, i, nil
	}
	digits := len(lit)
	if lit[0] == '-' {
		digits--
	}
	if digits > IntMaxStrDigits {
		return Value{}, 0, &Error{ValueError, fmt.Sprintf("Exceeds the limit (%d digits) for integer string conversion: value has %d digits; use sys.set_int_max_str_digits() to increase the limit", IntMaxStrDigits, digits)}
	}
	return Value{Kind: IntKind, Str: lit}, i, nil
}

func hexVal(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

func (d *decoder) hex4(i int) (rune, bool) {
	if i+4 > len(d.s) {
		return 0, false
	}
	var r rune
	for k := 0; k < 4; k++ {
		h, ok := hexVal(d.s[i+k])
		if !ok {
			return 0, false
		}
		r = r<<4 | h
	}
	return r, true
}

// appendWTF8 appends r, encoding a surrogate as its generalized UTF-8 bytes.
func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(b, r)
}

// str is scanstring_unicode (strict): the string whose body starts at i.
func (d *decoder) str(i int) (string, int, error) {
	s := d.s
	// Fast path: no escapes.
	j := i
	for j < len(s) {
		c := s[j]
		if c == '"' {
			return s[i:j], j + 1, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", 0, decodeErr("Invalid control character at")
		}
		j++
	}
	if j >= len(s) {
		return "", 0, decodeErr("Unterminated string starting at")
	}
	b := []byte(s[i:j])
	for j < len(s) {
		c := s[j]
		switch {
		case c == '"':
			return string(b), j + 1, nil
		case c < 0x20:
			return "", 0, decodeErr("Invalid control character at")
		case c != '\\':
			b = append(b, c)
			j++
			continue
		}
		j++ // past the backslash
		if j >= len(s) {
			return "", 0, decodeErr("Unterminated string starting at")
		}
		esc := s[j]
		j++
		switch esc {
		case '"', '\\', '/':
			b = append(b, esc)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := d.hex4(j)
			if !ok {
				return "", 0, decodeErr("Invalid \\uXXXX escape")
			}
			j += 4
			if r >= 0xD800 && r <= 0xDBFF && j+1 < len(s) && s[j] == '\\' && s[j+1] == 'u' {
				r2, ok := d.hex4(j + 2)
				if !ok {
					return "", 0, decodeErr("Invalid \\uXXXX escape")
				}
				if r2 >= 0xDC00 && r2 <= 0xDFFF {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					j += 6
				}
			}
			b = appendWTF8(b, r)
		default:
			return "", 0, decodeErr("Invalid \\escape")
		}
	}
	return "", 0, decodeErr("Unterminated string starting at")
}

func (d *decoder) object(i, depth int) (Value, int, error) {
	s := d.s
	v := Value{Kind: DictKind}
	i = d.ws(i)
	if i < len(s) && s[i] == '}' {
		return v, i + 1, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return Value{}, 0, decodeErr("Expecting property name enclosed in double quotes")
		}
		key, next, err := d.str(i + 1)
		if err != nil {
			return Value{}, 0, err
		}
		i = d.ws(next)
		if i >= len(s) || s[i] != ':' {
			return Value{}, 0, decodeErr("Expecting ':' delimiter")
		}
		i = d.ws(i + 1)
		val, next, err := d.value(i, depth)
		if err != nil {
			return Value{}, 0, err
		}
		v.Keys = append(v.Keys, key)
		v.Members = append(v.Members, val)
		i = d.ws(next)
		if i < len(s) && s[i] == '}' {
			return v, i + 1, nil
		}
		if i >= len(s) || s[i] != ',' {
			return Value{}, 0, decodeErr("Expecting ',' delimiter")
		}
		i = d.ws(i + 1)
	}
}

func (d *decoder) array(i, depth int) (Value, int, error) {
	s := d.s
	v := Value{Kind: ListKind}
	i = d.ws(i)
	if i < len(s) && s[i] == ']' {
		return v, i + 1, nil
	}
	for {
		val, next, err := d.value(i, depth)
		if err != nil {
			return Value{}, 0, err
		}
		v.Items = append(v.Items, val)
		i = d.ws(next)
		if i < len(s) && s[i] == ']' {
			return v, i + 1, nil
		}
		if i >= len(s) || s[i] != ',' {
			return Value{}, 0, decodeErr("Expecting ',' delimiter")
		}
		i = d.ws(i + 1)
	}
}
