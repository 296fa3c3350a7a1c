package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcprl/mcprl/chat"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CatalogPreamble is the first line of the seed's system prompt.
const CatalogPreamble = "You are a Model Context Protocol reasoning agent. You have access to the following MCP tools:"

// RenderCall writes a call the way Qwen2.5's chat template does:
// "<tool_call>\n{\"name\": NAME, \"arguments\": ARGS}\n</tool_call>", with the
// arguments' bytes as the model wrote them (key order kept) and {} when empty.
func RenderCall(c chat.Call) string {
	args := bytes.TrimSpace(c.Arguments)
	if len(args) == 0 {
		args = []byte("{}")
	}
	return OpenTag + "\n{\"name\": " + jsonString(c.Name, false) + ", \"arguments\": " + string(args) + "}\n" + CloseTag
}

// RenderCatalog writes the tool catalog in the form of the seed's system
// prompt: the preamble, then for each tool "- name: NAME" and
// "  inputSchema: PROPS" where PROPS is the input schema's "properties"
// object serialized as Python's json.dumps does (", " and ": " separators,
// non-ASCII escaped), keys in the schema's order.
func RenderCatalog(tools []*mcp.Tool) string {
	var b strings.Builder
	b.WriteString(CatalogPreamble)
	for _, t := range tools {
		b.WriteString("\n- name: ")
		b.WriteString(t.Name)
		b.WriteString("\n  inputSchema: ")
		props := []byte("{}")
		if raw, err := schemaJSON(t.InputSchema); err == nil {
			if p, ok := member(raw, "properties"); ok {
				props = p
			}
		}
		s, err := pythonDumps(props)
		if err != nil {
			s = "{}"
		}
		b.WriteString(s)
	}
	return b.String()
}

// FunctionSchemas converts tools to OpenAI-style function schemas,
// {"type": "function", "function": {"name", "description", "parameters"}},
// for chat templates. The parameters are the tool's input schema with its
// key order kept as the schema value marshals.
func FunctionSchemas(tools []*mcp.Tool) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		params, err := schemaJSON(t.InputSchema)
		if err != nil || len(params) == 0 || string(params) == "null" {
			params = []byte(`{"type":"object","properties":{}}`)
		}
		var b bytes.Buffer
		b.WriteString(`{"type":"function","function":{"name":`)
		b.WriteString(jsonString(t.Name, false))
		if t.Description != "" {
			b.WriteString(`,"description":`)
			b.WriteString(jsonString(t.Description, false))
		}
		b.WriteString(`,"parameters":`)
		b.Write(params)
		b.WriteString("}}")
		out = append(out, json.RawMessage(b.Bytes()))
	}
	return out
}

// schemaJSON marshals a schema value without HTML escaping and compacts it.
func schemaJSON(schema any) ([]byte, error) {
	var raw []byte
	switch s := schema.(type) {
	case nil:
		return nil, fmt.Errorf("no schema")
	case json.RawMessage:
		raw = s
	case []byte:
		raw = s
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(schema); err != nil {
			return nil, fmt.Errorf("marshal input schema: %w", err)
		}
		raw = buf.Bytes()
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return nil, fmt.Errorf("input schema is not JSON: %w", err)
	}
	return c.Bytes(), nil
}

// member returns the raw value of key in a JSON object, scanning tokens so
// that nothing is reordered.
func member(obj []byte, key string) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if k, _ := t.(string); k == key {
			return v, true
		}
	}
	return nil, false
}

// pythonDumps re-serializes JSON as Python's json.dumps(obj) with default
// arguments: separators ", " and ": ", ensure_ascii, key order kept.
func pythonDumps(raw []byte) (string, error) {
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
			b.WriteString(jsonString(v, true))
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

// jsonString quotes s as JSON without HTML escaping; with ascii, non-ASCII
// characters are written as \uXXXX escapes (surrogate pairs above U+FFFF),
// as Python's json.dumps does by default.
func jsonString(s string, ascii bool) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r < 0x7f || !ascii:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
