package toolcall

import (
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that spans are ordered and in
// bounds, and that each well-formed call renders and parses back the same.
// Seed corpus: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(`<tool_call>{"name": "query_database", "arguments": {"sql": "SELECT 1"}}</tool_call>`)
	f.Add(`<tool_call>{"name": "a"`)
	f.Add(`<tool_call><tool_call></tool_call></tool_call>`)
	f.Fuzz(func(t *testing.T, text string) {
		ps := Parse(text)
		prev := 0
		for _, p := range ps {
			if p.Start < prev || p.End < p.Start || p.End > len(text) || !strings.HasPrefix(text[p.Start:], OpenTag) {
				t.Fatalf("bad span %d..%d (prev %d) in %q", p.Start, p.End, prev, text)
			}
			prev = p.End
			if p.Err != nil {
				if p.Err.Kind == "" || p.Err.Msg == "" {
					t.Fatalf("empty error for %q", p.Raw)
				}
				continue
			}
			back := Parse(RenderCall(p.Call))
			if len(back) != 1 || back[0].Err != nil || back[0].Call.Name != p.Call.Name {
				t.Fatalf("round trip of %+v: %+v", p.Call, back)
			}
		}
		_ = StripCalls(text)
		_ = ParseKnown(text, []string{"query_database"})
	})
}
