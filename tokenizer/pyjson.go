package tokenizer

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/mcprl/mcprl/internal/jinja"
	"github.com/mcprl/mcprl/internal/pycompat"
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
			if v.AsInt() > maxIndent {
				return jinja.Undefined(), fmt.Errorf("tojson: indent %d is more than %d", v.AsInt(), maxIndent)
			}
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

// maxIndent bounds tojson's indent: a chat template comes with a model's
// files, and indent=10000000000 would allocate as many spaces per line.
const maxIndent = 1 << 10

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
	// Bounded as the template engine bounds what a template builds: Python
	// raises on a value that holds itself (ValueError: Circular reference
	// detected), and the text stops at the engine's limit.
	if level > jinja.MaxDepth {
		return fmt.Errorf("tojson: a value nested more than %d deep (a list or dict that holds itself?)", jinja.MaxDepth)
	}
	if sb.Len() > jinja.MaxBytes {
		return fmt.Errorf("tojson: more than %d bytes (the template's limit)", jinja.MaxBytes)
	}
	switch {
	case v.IsNone(), v.IsUndefined():
		sb.WriteString("null")
	case v.IsBool():
		sb.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		sb.WriteString(pycompat.FloatRepr(v.AsFloat()))
	case v.IsString():
		sb.WriteString(pycompat.Quote(v.AsString(), e.ensureASCII))
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
			sb.WriteString(pycompat.Quote(k, e.ensureASCII))
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
