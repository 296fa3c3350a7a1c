package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
)

// renderCase is the reference file's form: HF chat messages, tools, and what
// Python Jinja2 rendered from them.
type renderFile struct {
	Tools    []json.RawMessage `json:"tools"`
	Messages []hfMessage       `json:"messages"`
	Rendered map[string]string `json:"rendered"`
}

type hfMessage struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	Name      string `json:"name"`
	ToolCalls []struct {
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (m hfMessage) task() chat.Message {
	out := chat.Message{Role: m.Role, Content: m.Content, Name: m.Name}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, chat.Call{Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return out
}

func readRenderFile(t *testing.T, name string) renderFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "parity", name))
	if err != nil {
		t.Fatal(err)
	}
	var f renderFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

func taskMessages(ms []hfMessage) []chat.Message {
	out := make([]chat.Message, len(ms))
	for i, m := range ms {
		out[i] = m.task()
	}
	return out
}

func qwen3Template(t *testing.T) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "qwen3_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := ParseTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// TestTemplateParity reproduces the reference Jinja2 renders byte for byte:
// Qwen2.5 and Qwen3, with tools and tool calls, and with a generation prompt.
func TestTemplateParity(t *testing.T) {
	f := readRenderFile(t, "jinja2_rendered_prompts.json")
	q25, err := qwen(t).Template()
	if err != nil {
		t.Fatal(err)
	}
	templates := map[string]*Template{"qwen2.5": q25, "qwen3": qwen3Template(t)}
	msgs := taskMessages(f.Messages)
	if len(f.Rendered) != 4 {
		t.Fatalf("%d reference renders, want 4", len(f.Rendered))
	}
	for name, want := range f.Rendered {
		family, kind, _ := strings.Cut(name, "_")
		var got string
		var err error
		switch kind {
		case "tools":
			got, err = templates[family].Render(msgs, f.Tools, false)
		case "gen":
			got, err = templates[family].Render(msgs[:1], nil, true)
		default:
			t.Fatalf("unknown render %q", name)
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got != want {
			t.Errorf("%s differs from Jinja2:\n got  %q\n want %q", name, got, want)
		}
	}
}

// TestTemplateExtraRenders checks 62 more Jinja2 renders (gen_extra_renders.py):
// system prompts, several tool calls in one turn, consecutive tool results,
// unsorted and nested argument keys, arguments given as a JSON string,
// non-ASCII and HTML characters, floats (1.0, 1e-07, 1e+16), U+2028 and
// control characters, Qwen3 thinking history and enable_thinking, and
// tojson's indent/separators/sort_keys/ensure_ascii arguments.
func TestTemplateExtraRenders(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "parity", "extra_renders.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		CustomTemplate string                 `json:"custom_template"`
		Tools          []json.RawMessage      `json:"tools"`
		Conversations  map[string][]hfMessage `json:"conversations"`
		Cases          []struct {
			Template, Conversation string
			Tools                  bool
			AddGenerationPrompt    bool `json:"add_generation_prompt"`
			Vars                   map[string]any
			Rendered               string
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	q25, err := qwen(t).Template()
	if err != nil {
		t.Fatal(err)
	}
	custom, err := ParseTemplate(f.CustomTemplate)
	if err != nil {
		t.Fatal(err)
	}
	templates := map[string]*Template{"qwen2.5": q25, "qwen3": qwen3Template(t), "custom": custom}
	if len(f.Cases) != 62 {
		t.Fatalf("%d cases, want 62", len(f.Cases))
	}
	for i, c := range f.Cases {
		var tools []json.RawMessage
		if c.Tools {
			tools = f.Tools
		}
		msgs := taskMessages(f.Conversations[c.Conversation])
		got, err := templates[c.Template].RenderVars(msgs, tools, c.AddGenerationPrompt, c.Vars)
		if err != nil {
			t.Errorf("case %d (%s %s tools=%v gen=%v): %v", i, c.Template, c.Conversation, c.Tools, c.AddGenerationPrompt, err)
			continue
		}
		if got != c.Rendered {
			t.Errorf("case %d (%s %s tools=%v gen=%v vars=%v) differs from Jinja2:\n got  %q\n want %q",
				i, c.Template, c.Conversation, c.Tools, c.AddGenerationPrompt, c.Vars, got, c.Rendered)
		}
	}
}

// TestTemplateRaiseException: a template's raise_exception surfaces as an error.
func TestTemplateRaiseException(t *testing.T) {
	tp, err := ParseTemplate(`{%- if messages[0].role != 'user' %}{{ raise_exception('first message must be user, got ' + messages[0].role) }}{% endif %}ok`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Render([]chat.Message{{Role: "tool", Content: "x"}}, nil, false); err == nil || !strings.Contains(err.Error(), "first message must be user, got tool") {
		t.Errorf("err = %v, want the raised message", err)
	}
	if got, err := tp.Render([]chat.Message{{Role: "user", Content: "x"}}, nil, false); err != nil || got != "ok" {
		t.Errorf("Render = %q, %v; want ok", got, err)
	}
}

// TestTemplateBadArguments: tool-call arguments that are not JSON are an error, not a silent render.
func TestTemplateBadArguments(t *testing.T) {
	tp, err := qwen(t).Template()
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: []chat.Call{{Name: "f", Arguments: json.RawMessage(`{"a": `)}}}}
	if _, err := tp.Render(msgs, nil, false); err == nil {
		t.Error("Render accepted truncated JSON arguments")
	}
}

// TestTemplateTrailingNewline: like Jinja2 (keep_trailing_newline=False), one trailing newline of the source is
// not rendered; a second one is.
func TestTemplateTrailingNewline(t *testing.T) {
	for src, want := range map[string]string{"{{ 'x' }}\n": "x", "{{ 'x' }}\n\n": "x\n", "{{ 'x' }}": "x"} {
		tp, err := ParseTemplate(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tp.Render(nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%q renders %q, want %q", src, got, want)
		}
	}
}
