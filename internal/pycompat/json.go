package pycompat

import (
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"
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
	Kind Kind
	Bool bool
	Str  string
	c    *container // list and dict contents
}

type container struct {
	items []Value  // list elements, or dict values parallel to keys
	keys  []string // dict keys, in order, duplicates included
}

// Items returns a list's elements (nil for other kinds).
func (v *Value) Items() []Value {
	if v.Kind != ListKind || v.c == nil {
		return nil
	}
	return v.c.items
}

// Keys returns a dict's keys in order, duplicates included.
func (v *Value) Keys() []string {
	if v.Kind != DictKind || v.c == nil {
		return nil
	}
	return v.c.keys
}

// Get is dict.get(key): the value of the last member named key.
func (v *Value) Get(key string) (*Value, bool) {
	if v.Kind != DictKind || v.c == nil {
		return nil, false
	}
	for i := len(v.c.keys) - 1; i >= 0; i-- {
		if v.c.keys[i] == key {
			return &v.c.items[i], true
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
	// scratch, when set, receives decoded strings that need escapes
	// processed, instead of a fresh allocation each.
	scratch *[]byte
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
	// Fast path: no escapes, the string is a substring of the input.
	j := plainRun(s, i)
	for j < len(s) {
		c := s[j]
		if c == '"' {
			return s[i:j], j + 1, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		j++
	}
	if j >= len(s) {
		return "", 0, decodeErr("Unterminated string starting at")
	}
	// The decoded string is no longer than the rest of the input: one
	// allocation (bounded for huge inputs), no regrowth.
	size := len(s) - i
	if size > 1<<16 {
		size = j - i + 1<<12
	}
	var b []byte
	fromScratch := d.scratch != nil && cap(*d.scratch)-len(*d.scratch) >= size
	if fromScratch {
		sc := *d.scratch
		b = sc[len(sc):len(sc)]
	} else {
		b = make([]byte, 0, size)
	}
	b = append(b, s[i:j]...)
	for j < len(s) {
		c := s[j]
		if c == '"' {
			if fromScratch {
				if sc := *d.scratch; len(b) > 0 && unsafe.SliceData(b) == unsafe.SliceData(sc[len(sc):cap(sc)]) {
					*d.scratch = sc[:len(sc)+len(b)] // the bytes are taken
				}
			}
			// b is not written again until the scratch is reset: share its bytes.
			return unsafe.String(unsafe.SliceData(b), len(b)), j + 1, nil
		}
		if c < 0x20 {
			return "", 0, decodeErr("Invalid control character at")
		}
		if c != '\\' {
			// Copy the run up to the next quote, backslash or control byte.
			k := plainRun(s, j+1)
			for k < len(s) && s[k] != '"' && s[k] != '\\' && s[k] >= 0x20 {
				k++
			}
			b = append(b, s[j:k]...)
			j = k
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
	c := &container{items: make([]Value, 0, 4), keys: make([]string, 0, 4)}
	v.c = c
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
		c.keys = append(c.keys, key)
		c.items = append(c.items, val)
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
	c := &container{}
	v.c = c
	for {
		val, next, err := d.value(i, depth)
		if err != nil {
			return Value{}, 0, err
		}
		c.items = append(c.items, val)
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

// LoadsFields is json.loads(s) for a str s that must decode to a dict,
// returning only the string members named in keys (last duplicate wins)
// without building the rest: what a JSONL reader needs from each line.
// found[i] reports whether keys[i] was present; a present member that is
// not a str is reported in kinds[i]. Errors are those Loads raises, and a
// *Error of class "TypeError" when s is valid JSON but not a dict.
func LoadsFields(s string, keys []string, vals []string, found []bool, kinds []Kind) error {
	return loadsFields(decoder{s: s, maxDepth: DefaultMaxDepth}, keys, vals, found, kinds)
}

// Decoder keeps a scratch buffer across calls so that decoding a stream
// of lines allocates nothing per line.
type Decoder struct {
	scratch []byte
}

// Fields is LoadsFields, except that the strings it returns share the
// Decoder's scratch memory: they are valid until the next call.
func (dec *Decoder) Fields(s string, keys []string, vals []string, found []bool, kinds []Kind) error {
	if cap(dec.scratch) < len(s) {
		dec.scratch = make([]byte, 0, 2*len(s))
	}
	dec.scratch = dec.scratch[:0]
	return loadsFields(decoder{s: s, maxDepth: DefaultMaxDepth, scratch: &dec.scratch}, keys, vals, found, kinds)
}

func loadsFields(d decoder, keys []string, vals []string, found []bool, kinds []Kind) error {
	s := d.s
	if strings.HasPrefix(s, "\ufeff") {
		return &Error{JSONDecodeError, "Unexpected UTF-8 BOM (decode using utf-8-sig)"}
	}
	i := d.ws(0)
	if i >= len(s) || s[i] != '{' {
		v, err := LoadsDepth(s, DefaultMaxDepth)
		if err != nil {
			return err
		}
		return &Error{"TypeError", "want a JSON object, got " + v.Kind.TypeName()}
	}
	i = d.ws(i + 1)
	if i < len(s) && s[i] == '}' {
		i++
	} else {
		for {
			if i >= len(s) || s[i] != '"' {
				return decodeErr("Expecting property name enclosed in double quotes")
			}
			key, next, err := d.str(i + 1)
			if err != nil {
				return err
			}
			i = d.ws(next)
			if i >= len(s) || s[i] != ':' {
				return decodeErr("Expecting ':' delimiter")
			}
			i = d.ws(i + 1)
			want := -1
			for k, name := range keys {
				if name == key {
					want = k
				}
			}
			if want >= 0 && i < len(s) && s[i] == '"' {
				str, next, err := d.str(i + 1)
				if err != nil {
					return err
				}
				vals[want], found[want], kinds[want] = str, true, StrKind
				i = next
			} else {
				next, kind, err := d.skip(i, 1)
				if err != nil {
					return err
				}
				if want >= 0 {
					vals[want], found[want], kinds[want] = "", true, kind
				}
				i = next
			}
			i = d.ws(i)
			if i < len(s) && s[i] == '}' {
				i++
				break
			}
			if i >= len(s) || s[i] != ',' {
				return decodeErr("Expecting ',' delimiter")
			}
			i = d.ws(i + 1)
		}
	}
	if i = d.ws(i); i != len(s) {
		return decodeErr("Extra data")
	}
	return nil
}

// skip validates the value at i as value would, without building it (no
// allocation), and returns where it ends and its kind.
func (d *decoder) skip(i, depth int) (int, Kind, error) {
	s := d.s
	if i >= len(s) {
		return 0, 0, decodeErr("Expecting value")
	}
	switch c := s[i]; c {
	case '"':
		end, err := d.skipStr(i + 1)
		return end, StrKind, err
	case '{', '[':
		if depth >= d.maxDepth {
			what := "object"
			if c == '[' {
				what = "array"
			}
			return 0, 0, &Error{RecursionError, "maximum recursion depth exceeded while decoding a JSON " + what + " from a unicode string"}
		}
		if c == '{' {
			end, err := d.skipObject(i+1, depth+1)
			return end, DictKind, err
		}
		end, err := d.skipArray(i+1, depth+1)
		return end, ListKind, err
	}
	v, end, err := d.value(i, depth) // scalars: no allocation
	return end, v.Kind, err
}

// skipStr validates a string body starting at i as str would.
func (d *decoder) skipStr(i int) (int, error) {
	s := d.s
	for j := plainRun(s, i); j < len(s); {
		c := s[j]
		switch {
		case c == '"':
			return j + 1, nil
		case c < 0x20:
			return 0, decodeErr("Invalid control character at")
		case c != '\\':
			j = plainRun(s, j+1)
			continue
		}
		j++
		if j >= len(s) {
			break
		}
		esc := s[j]
		j++
		switch esc {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if _, ok := d.hex4(j); !ok {
				return 0, decodeErr("Invalid \\uXXXX escape")
			}
			j += 4
		default:
			return 0, decodeErr("Invalid \\escape")
		}
	}
	return 0, decodeErr("Unterminated string starting at")
}

// members walks an object's members from just past its '{', calling
// member with the index of each value; member returns where the value ends.
func (d *decoder) members(i int, member func(key string, at int) (int, error)) (int, error) {
	s := d.s
	i = d.ws(i)
	if i < len(s) && s[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return 0, decodeErr("Expecting property name enclosed in double quotes")
		}
		key, next, err := d.str(i + 1)
		if err != nil {
			return 0, err
		}
		i = d.ws(next)
		if i >= len(s) || s[i] != ':' {
			return 0, decodeErr("Expecting ':' delimiter")
		}
		end, err := member(key, d.ws(i+1))
		if err != nil {
			return 0, err
		}
		i = d.ws(end)
		if i < len(s) && s[i] == '}' {
			return i + 1, nil
		}
		if i >= len(s) || s[i] != ',' {
			return 0, decodeErr("Expecting ',' delimiter")
		}
		i = d.ws(i + 1)
	}
}

func (d *decoder) skipObject(i, depth int) (int, error) {
	return d.members(i, func(_ string, at int) (int, error) {
		end, _, err := d.skip(at, depth)
		return end, err
	})
}

func (d *decoder) skipArray(i, depth int) (int, error) {
	s := d.s
	i = d.ws(i)
	if i < len(s) && s[i] == ']' {
		return i + 1, nil
	}
	for {
		end, _, err := d.skip(i, depth)
		if err != nil {
			return 0, err
		}
		i = d.ws(end)
		if i < len(s) && s[i] == ']' {
			return i + 1, nil
		}
		if i >= len(s) || s[i] != ',' {
			return 0, decodeErr("Expecting ',' delimiter")
		}
		i = d.ws(i + 1)
	}
}

// Field is one member read out of a dict: whether it was present, its
// kind, and its text when it is a str.
type Field struct {
	Present bool
	Kind    Kind
	Str     string
}

// CallView is what a tool-call reader takes from json.loads(text): the
// top-level kind and, when it is a dict, its "name" and "arguments"
// members (the last of duplicates, as dict.get gives) and, when that
// "arguments" is a dict, its member named by the argument key.
type CallView struct {
	Kind Kind
	Name Field
	Args Field
	Arg  Field
}

// LoadsCall is json.loads(s) reduced to a CallView: it accepts and rejects
// exactly what LoadsDepth does, with the same exception, but builds only
// the members it returns.
func LoadsCall(s, argKey string, maxDepth int) (CallView, error) {
	var v CallView
	if strings.HasPrefix(s, "\ufeff") {
		return v, &Error{JSONDecodeError, "Unexpected UTF-8 BOM (decode using utf-8-sig)"}
	}
	d := decoder{s: s, maxDepth: maxDepth}
	i := d.ws(0)
	var end int
	var err error
	if i < len(s) && s[i] == '{' && maxDepth > 0 {
		v.Kind = DictKind
		end, err = d.members(i+1, func(key string, at int) (int, error) {
			switch key {
			case "name":
				if at < len(s) && s[at] == '"' {
					str, end, err := d.str(at + 1)
					v.Name = Field{true, StrKind, str}
					return end, err
				}
				end, k, err := d.skip(at, 1)
				v.Name = Field{Present: true, Kind: k}
				return end, err
			case "arguments":
				v.Arg = Field{}
				if at < len(s) && s[at] == '{' && maxDepth > 1 {
					v.Args = Field{Present: true, Kind: DictKind}
					return d.members(at+1, func(k string, at int) (int, error) {
						if k != argKey {
							end, _, err := d.skip(at, 2)
							return end, err
						}
						if at < len(s) && s[at] == '"' {
							str, end, err := d.str(at + 1)
							v.Arg = Field{true, StrKind, str}
							return end, err
						}
						end, kind, err := d.skip(at, 2)
						v.Arg = Field{Present: true, Kind: kind}
						return end, err
					})
				}
				end, k, err := d.skip(at, 1)
				v.Args = Field{Present: true, Kind: k}
				return end, err
			}
			end, _, err := d.skip(at, 1)
			return end, err
		})
	} else {
		end, v.Kind, err = d.skip(i, 0)
	}
	if err != nil {
		return CallView{}, err
	}
	if end = d.ws(end); end != len(s) {
		return CallView{}, &Error{JSONDecodeError, "Extra data"}
	}
	return v, nil
}

// plainRun skips, eight bytes at a time, the bytes from i on that need no
// attention inside a string (not '"', '\\' or a control byte), and returns
// an index at or before the first byte that does.
func plainRun(s string, i int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(s) {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		t := (x - 0x20*lo) &^ x
		q := x ^ (0x22 * lo)
		t |= (q - lo) &^ q
		b := x ^ (0x5C * lo)
		t |= (b - lo) &^ b
		if t&hi != 0 {
			return i
		}
		i += 8
	}
	return i
}
