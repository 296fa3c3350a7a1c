package tokenizer

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/ardanlabs/jinja"
)

// Hugging Face renders chat templates with tojson = json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False). The jinja
// library's built-in tojson formats floats as Go does (1.0 -> "1",
// 1234567.5 -> "1.2345675e+06") and escapes U+2028/U+2029, where Python
// writes "1.0", "1234567.5" and the raw characters; tool schemas and
// arguments with such values would render (and tokenize) differently from
// transformers. The library looks a filter up in the template's data when it
// is not a built-in, so templates are compiled with their tojson filter
// renamed to pyToJSONName and that name is bound to pyToJSON.
const pyToJSONName = "mcprl_py_tojson"

var tojsonFilter = regexp.MustCompile(`\|\s*tojson\b`)

func renameToJSON(source string) string {
	return tojsonFilter.ReplaceAllString(source, "| "+pyToJSONName)
}

var pyToJSONValue = jinja.NewCallable("tojson", pyToJSON)

// pyToJSON is Python's json.dumps with HF's tojson defaults and keyword
// arguments (ensure_ascii, indent, separators, sort_keys).
func pyToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: no value")
	}
	e := pyEncoder{itemSep: ", ", keySep: ": "}
	if v, ok := kwargs["ensure_ascii"]; ok {
		e.ensureASCII = v.IsTruthy()
	}
	if v, ok := kwargs["sort_keys"]; ok {
		e.sortKeys = v.IsTruthy()
	}
	if v, ok := kwargs["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		switch {
		case v.IsInt():
			e.indent, e.hasIndent = strings.Repeat(" ", int(max(v.AsInt(), 0))), true
		case v.IsString():
			e.indent, e.hasIndent = v.AsString(), true
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: indent must be an int or a string")
		}
		e.itemSep = ","
	}
	if v, ok := kwargs["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Undefined(), fmt.Errorf("tojson: separators must be two strings")
		}
		e.itemSep, e.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	var sb strings.Builder
	if err := e.encode(&sb, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(sb.String()), nil
}

type pyEncoder struct {
	ensureASCII, sortKeys, hasIndent bool
	indent, itemSep, keySep          string
}

func (e *pyEncoder) newline(sb *strings.Builder, level int) {
	if e.hasIndent {
		sb.WriteByte('\n')
		sb.WriteString(strings.Repeat(e.indent, level))
	}
}

func (e *pyEncoder) encode(sb *strings.Builder, v jinja.Value, level int) error {
	switch {
	case v.IsNone(), v.IsUndefined():
		sb.WriteString("null")
	case v.IsBool():
		sb.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		sb.WriteString(pyFloatRepr(v.AsFloat()))
	case v.IsString():
		e.str(sb, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			sb.WriteString("[]")
			return nil
		}
		sb.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				sb.WriteString(e.itemSep)
			}
			e.newline(sb, level+1)
			if err := e.encode(sb, it, level+1); err != nil {
				return err
			}
		}
		e.newline(sb, level)
		sb.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			sb.WriteString("{}")
			return nil
		}
		if e.sortKeys {
			sort.Strings(keys)
		}
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(e.itemSep)
			}
			e.newline(sb, level+1)
			e.str(sb, k)
			sb.WriteString(e.keySep)
			val, _ := d.Get(k)
			if err := e.encode(sb, val, level+1); err != nil {
				return err
			}
		}
		e.newline(sb, level)
		sb.WriteByte('}')
	default:
		return fmt.Errorf("tojson: %s is not JSON serializable", v.String())
	}
	return nil
}

// str writes s as Python's json module does: \" \\ \n \r \t \b \f, other
// control characters as \u00XX, everything else raw (or \uXXXX, with
// surrogate pairs, when ensure_ascii).
func (e *pyEncoder) str(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (e.ensureASCII && r > 0x7e && r <= 0xffff):
				fmt.Fprintf(sb, `\u%04x`, r)
			case e.ensureASCII && r > 0xffff:
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(sb, `\u%04x\u%04x`, hi, lo)
			default:
				sb.WriteRune(r)
			}
		}
	}
	sb.WriteByte('"')
}

// pyFloatRepr formats f as Python's float repr (what json.dumps writes):
// the shortest round-tripping digits, in exponent form when the decimal
// exponent is below -4 or at least 16, otherwise positional with at least
// one decimal ("1.0"); Infinity, -Infinity and NaN as json.dumps allows them.
func pyFloatRepr(f float64) string {
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
