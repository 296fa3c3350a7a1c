package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/internal/jinja"
)

// renderTimeout bounds one render (a variable so that tests can shorten it).
var renderTimeout = jinja.DefaultTimeout

// Template is a compiled chat template (the Jinja chat_template of
// tokenizer_config.json). Rendering matches Python Jinja2 with Hugging Face's
// settings (trim_blocks, lstrip_blocks, tojson as json.dumps(ensure_ascii=False)
// - see pyjson.go, raise_exception) byte for byte; messages, tool schemas and tool-call
// arguments are passed as ordered values so JSON key order survives.
// A Template is safe for concurrent use.
//
// A chat template comes with a model's files, so a render is bounded as
// Jinja2's sandbox (which transformers renders in) bounds range(): range
// gives at most 100,000 items; and further, any string or the output at
// most 32 MiB, any list 1,048,576 items, macro calls and value nesting 200
// deep, the time 10 s (internal/jinja's limits). Past one, Render returns
// an error naming it.
type Template struct {
	tmpl *jinja.Template
	vars map[string]jinja.Value // special-token strings HF passes to every render
}

// ParseTemplate compiles a chat template source.
func ParseTemplate(source string) (*Template, error) {
	// Jinja2 drops one trailing newline of a template's source (keep_trailing_newline=False, as transformers
	// leaves it); a chat_template.jinja file usually ends with one.
	source = strings.TrimSuffix(source, "\n")
	tmpl, err := jinja.Compile(renameToJSON(source))
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return &Template{tmpl: tmpl, vars: map[string]jinja.Value{}}, nil
}

// Template compiles the tokenizer's chat_template. Like transformers'
// apply_chat_template it also passes bos_token, eos_token, pad_token and
// unk_token (None where unset) to the template.
func (t *Tokenizer) Template() (*Template, error) {
	src, err := t.ChatTemplateSource()
	if err != nil {
		return nil, err
	}
	tp, err := ParseTemplate(src)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", t.dir, err)
	}
	for name, raw := range map[string]json.RawMessage{
		"bos_token": t.config.BOSToken, "eos_token": t.config.EOSToken,
		"pad_token": t.config.PadToken, "unk_token": t.config.UnkToken,
	} {
		s, err := tokenString(raw)
		if err != nil || s == "" {
			tp.vars[name] = jinja.None()
		} else {
			tp.vars[name] = jinja.NewString(s)
		}
	}
	return tp, nil
}

// ChatTemplateSource returns tokenizer_config.json's chat_template: the string,
// or the entry named "default" when it is a list of named templates.
func (t *Tokenizer) ChatTemplateSource() (string, error) {
	raw := t.config.ChatTemplate
	if len(raw) == 0 || string(raw) == "null" {
		return "", fmt.Errorf("tokenizer %s: tokenizer_config.json has no chat_template", t.dir)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("tokenizer %s: chat_template: %w", t.dir, err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf("tokenizer %s: chat_template has no \"default\" entry", t.dir)
}

// Render renders messages and tools (OpenAI-style function schemas, e.g.
// {"type":"function","function":{...}}; nil for none) as transformers'
// apply_chat_template(messages, tools=tools, add_generation_prompt=...,
// tokenize=False) does.
func (tp *Template) Render(messages []chat.Message, tools []json.RawMessage, addGenerationPrompt bool) (string, error) {
	return tp.RenderVars(messages, tools, addGenerationPrompt, nil)
}

// RenderVars is Render with extra template variables, such as Qwen3's
// enable_thinking. Values are JSON-encoded Go values (json.RawMessage keeps order).
func (tp *Template) RenderVars(messages []chat.Message, tools []json.RawMessage, addGenerationPrompt bool, vars map[string]any) (string, error) {
	data := make(map[string]jinja.Value, len(tp.vars)+len(vars)+3)
	for k, v := range tp.vars {
		data[k] = v
	}
	for k, v := range vars {
		raw, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("chat template: variable %s: %w", k, err)
		}
		val, err := orderedValue(raw)
		if err != nil {
			return "", fmt.Errorf("chat template: variable %s: %w", k, err)
		}
		data[k] = val
	}
	msgs, err := messageValues(messages)
	if err != nil {
		return "", err
	}
	data["messages"] = msgs
	data["tools"] = jinja.None()
	if tools != nil {
		items := make([]jinja.Value, len(tools))
		for i, raw := range tools {
			if items[i], err = orderedValue(raw); err != nil {
				return "", fmt.Errorf("chat template: tool %d: %w", i, err)
			}
		}
		data["tools"] = jinja.NewList(items)
	}
	data["add_generation_prompt"] = jinja.NewBool(addGenerationPrompt)
	data[pyToJSONName] = pyToJSONValue
	out, err := tp.tmpl.RenderValuesWithin(data, renderTimeout)
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}

// messageValues builds the HF chat form of messages: {role, content,
// tool_calls: [{type: "function", function: {name, arguments}}], name}.
func messageValues(messages []chat.Message) (jinja.Value, error) {
	items := make([]jinja.Value, len(messages))
	for i, m := range messages {
		v := jinja.NewDict()
		d := v.AsDict()
		d.Set("role", jinja.NewString(m.Role))
		d.Set("content", jinja.NewString(m.Content))
		if len(m.ToolCalls) > 0 {
			calls := make([]jinja.Value, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				args := jinja.NewDict()
				if len(bytes.TrimSpace(c.Arguments)) > 0 {
					var err error
					if args, err = orderedValue(c.Arguments); err != nil {
						return jinja.Value{}, fmt.Errorf("chat template: message %d tool call %d (%s) arguments: %w", i, j, c.Name, err)
					}
				}
				fn := jinja.NewDict()
				fn.AsDict().Set("name", jinja.NewString(c.Name))
				fn.AsDict().Set("arguments", args)
				call := jinja.NewDict()
				call.AsDict().Set("type", jinja.NewString("function"))
				call.AsDict().Set("function", fn)
				calls[j] = call
			}
			d.Set("tool_calls", jinja.NewList(calls))
		}
		if m.Name != "" {
			d.Set("name", jinja.NewString(m.Name))
		}
		items[i] = v
	}
	return jinja.NewList(items), nil
}

// orderedValue decodes one JSON value into a jinja.Value keeping object key
// order (a Go map would sort the keys and change what tojson writes).
// Numbers keep Python's int/float distinction via json.Number.
func orderedValue(raw []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jinja.Value{}, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			v := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				val, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				v.AsDict().Set(kt.(string), val)
			}
			_, err := dec.Token() // '}'
			return v, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				val, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, val)
			}
			_, err := dec.Token() // ']'
			return jinja.NewList(items), err
		}
		return jinja.Value{}, fmt.Errorf("unexpected %v", x)
	default:
		return jinja.FromGoValue(x), nil // nil, bool, string, json.Number
	}
}
