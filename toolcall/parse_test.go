package toolcall

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
)

func TestParseWellFormed(t *testing.T) {
	text := "I will query.\n<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT 1\", \"b\": 2, \"a\": 1}}\n</tool_call>" +
		"then <tool_call>{\"name\":\"run_linter\",\"arguments\":{\"path\":\"src/\"}}</tool_call> done"
	ps := Parse(text)
	if len(ps) != 2 {
		t.Fatalf("got %d calls, want 2: %+v", len(ps), ps)
	}
	if ps[0].Err != nil || ps[0].Call.Name != "query_database" {
		t.Fatalf("first call: %+v", ps[0])
	}
	// Key order of the arguments survives.
	if got := string(ps[0].Call.Arguments); got != `{"sql": "SELECT 1", "b": 2, "a": 1}` {
		t.Errorf("arguments = %s", got)
	}
	if ps[1].Err != nil || ps[1].Call.Name != "run_linter" || string(ps[1].Call.Arguments) != `{"path":"src/"}` {
		t.Errorf("second call: %+v", ps[1])
	}
	if text[ps[1].Start:ps[1].End] != `<tool_call>{"name":"run_linter","arguments":{"path":"src/"}}</tool_call>` {
		t.Errorf("span = %q", text[ps[1].Start:ps[1].End])
	}
	if got := StripCalls(text); got != "I will query.\nthen  done" {
		t.Errorf("StripCalls = %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		text string
		kind ErrorKind
	}{
		{`<tool_call>{"name": "q", "arguments": {}</tool_call>`, ErrBadJSON},
		{`<tool_call></tool_call>`, ErrBadJSON},
		{`<tool_call>{"name": "q"} {"x": 1}</tool_call>`, ErrBadJSON},
		{`<tool_call>{"name": "q", "arguments": {"a": NaN}}</tool_call>`, ErrBadJSON},
		{`<tool_call>["q"]</tool_call>`, ErrNotObject},
		{`<tool_call>"q"</tool_call>`, ErrNotObject},
		{`<tool_call>{"arguments": {}}</tool_call>`, ErrMissingName},
		{`<tool_call>{"name": 3, "arguments": {}}</tool_call>`, ErrMissingName},
		{`<tool_call>{"name": "", "arguments": {}}</tool_call>`, ErrMissingName},
		{`<tool_call>{"name": "q", "arguments": "{\"sql\": 1}"}</tool_call>`, ErrArguments},
		{`<tool_call>{"name": "q", "arguments": null}</tool_call>`, ErrArguments},
		{`<tool_call>{"name": "q", "arguments": [1]}</tool_call>`, ErrArguments},
		{`<tool_call>{"name": "q", "arguments": {}}`, ErrUnterminated},
	}
	for _, c := range cases {
		ps := Parse(c.text)
		if len(ps) != 1 || ps[0].Err == nil || ps[0].Err.Kind != c.kind {
			t.Errorf("Parse(%q) = %+v, want one %s error", c.text, ps, c.kind)
			continue
		}
		if ps[0].Err.Error() == "" {
			t.Errorf("Parse(%q): empty message", c.text)
		}
	}
}

func TestParseArgumentsDefaultAndDuplicates(t *testing.T) {
	ps := Parse(`<tool_call>{"name": "a", "name": "run_linter"}</tool_call>`)
	if len(ps) != 1 || ps[0].Err != nil || ps[0].Call.Name != "run_linter" || string(ps[0].Call.Arguments) != "{}" {
		t.Fatalf("got %+v", ps)
	}
}

func TestParseReopenedTag(t *testing.T) {
	text := `<tool_call>{"name": "a", <tool_call>{"name": "b", "arguments": {}}</tool_call>`
	ps := Parse(text)
	if len(ps) != 2 {
		t.Fatalf("got %+v", ps)
	}
	if ps[0].Err == nil || ps[0].Err.Kind != ErrUnterminated {
		t.Errorf("first: %+v", ps[0])
	}
	if ps[1].Err != nil || ps[1].Call.Name != "b" {
		t.Errorf("second: %+v", ps[1])
	}
}

func TestParseKnown(t *testing.T) {
	text := `<tool_call>{"name": "query_database", "arguments": {"sql": "x"}}</tool_call><tool_call>{"name": "drop_everything", "arguments": {}}</tool_call>`
	ps := ParseKnown(text, []string{"query_database", "run_linter"})
	if ps[0].Err != nil {
		t.Errorf("known tool rejected: %v", ps[0].Err)
	}
	if ps[1].Err == nil || ps[1].Err.Kind != ErrUnknownTool || !strings.Contains(ps[1].Err.Error(), "query_database, run_linter") {
		t.Errorf("unknown tool: %+v", ps[1].Err)
	}
	if ps[1].Call.Name != "drop_everything" {
		t.Errorf("the unknown call keeps its name: %+v", ps[1].Call)
	}
}

func TestRenderCallRoundTrip(t *testing.T) {
	c := chat.Call{Name: "query_database", Arguments: json.RawMessage(`{"sql": "SELECT \"a\" <b>", "z": 1, "a": 2}`)}
	s := RenderCall(c)
	want := "<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT \\\"a\\\" <b>\", \"z\": 1, \"a\": 2}}\n</tool_call>"
	if s != want {
		t.Fatalf("RenderCall = %q\nwant %q", s, want)
	}
	ps := Parse(s)
	if len(ps) != 1 || ps[0].Err != nil || ps[0].Call.Name != c.Name || string(ps[0].Call.Arguments) != string(c.Arguments) {
		t.Fatalf("round trip: %+v", ps)
	}
	if got := RenderCall(chat.Call{Name: "run_linter"}); got != "<tool_call>\n{\"name\": \"run_linter\", \"arguments\": {}}\n</tool_call>" {
		t.Errorf("empty arguments: %q", got)
	}
}
