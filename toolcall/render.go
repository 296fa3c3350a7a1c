package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/internal/pycompat"
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
	return OpenTag + "\n{\"name\": " + pycompat.Quote(c.Name, false) + ", \"arguments\": " + string(args) + "}\n" + CloseTag
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
		s, err := pycompat.Dumps(props)
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
		b.WriteString(pycompat.Quote(t.Name, false))
		if t.Description != "" {
			b.WriteString(`,"description":`)
			b.WriteString(pycompat.Quote(t.Description, false))
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
