package toolcall

import (
	"strings"
	"testing"
	"time"
)

// hostile are texts that made Parse quadratic when it searched for the
// closing tag from every opening tag to the end of the text.
func hostile(n int) map[string]string {
	return map[string]string{
		"opens":          strings.Repeat(OpenTag, n),
		"opens+close":    strings.Repeat(OpenTag, n) + CloseTag,
		"open-junk":      strings.Repeat(OpenTag+"{", n),
		"closes":         OpenTag + strings.Repeat(CloseTag, n),
		"calls":          strings.Repeat(OpenTag+`{"name": "q"}`+CloseTag, n),
		"half-open-tags": strings.Repeat("<tool_cal", n) + OpenTag,
		"close-first":    strings.Repeat(CloseTag+OpenTag, n),
	}
}

// TestScanIsLinear counts the bytes strings.Index reads: a parser
// that searches again from every opening tag to the end of the text hands
// it O(n²) bytes. The guard is deterministic, not a timing.
func TestScanIsLinear(t *testing.T) {
	for name, text := range hostile(20_000) {
		searched := 0
		index = func(s, sub string) int {
			i := strings.Index(s, sub)
			if i < 0 {
				searched += len(s) // read to the end
			} else {
				searched += i + len(sub) // read to the match
			}
			return i
		}
		Parse(text)
		StripCalls(text)
		index = strings.Index
		// Parse and StripCalls each search every byte at most about three
		// times (opening tag, closing tag, reopening tag).
		if limit := 2 * 4 * (len(text) + 1); searched > limit {
			t.Errorf("%s: %d bytes searched for a %d-byte text (limit %d): the scan is not linear", name, searched, len(text), limit)
		}
	}
}

// TestParseHostileFast is issue 29's case: 80,000 opening tags took 34.9 s
// of CPU. Linear, it takes milliseconds; the deadline is generous for a
// loaded machine.
func TestParseHostileFast(t *testing.T) {
	text := strings.Repeat(OpenTag, 80_000)
	begin := time.Now()
	ps := Parse(text)
	_ = StripCalls(text)
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("80,000 opening tags took %v", d)
	}
	if len(ps) != 1 || ps[0].Err == nil || ps[0].Err.Kind != ErrUnterminated || ps[0].End != len(text) {
		t.Fatalf("got %d blocks, want one unterminated block to the end", len(ps))
	}
}

// TestParseUnterminatedStops: an opening tag with no closing tag after it
// runs to the end of the text, and the search stops there.
func TestParseUnterminatedStops(t *testing.T) {
	text := `ok <tool_call>{"name": "a", <tool_call>{"name": "b", "arguments": {}}`
	ps := Parse(text)
	if len(ps) != 1 || ps[0].Err == nil || ps[0].Err.Kind != ErrUnterminated {
		t.Fatalf("got %+v", ps)
	}
	if ps[0].Start != 3 || ps[0].End != len(text) || ps[0].Raw != text[3+len(OpenTag):] {
		t.Errorf("span %d..%d raw %q", ps[0].Start, ps[0].End, ps[0].Raw)
	}
	if got := StripCalls(text); got != "ok" {
		t.Errorf("StripCalls = %q", got)
	}
	// A closing tag later still closes the last opening tag before it.
	text = `<tool_call>x<tool_call>y<tool_call>{"name": "c"}</tool_call> tail <tool_call>`
	ps = Parse(text)
	if len(ps) != 4 || ps[0].Err.Kind != ErrUnterminated || ps[1].Err.Kind != ErrUnterminated ||
		ps[2].Err != nil || ps[2].Call.Name != "c" || ps[3].Err.Kind != ErrUnterminated {
		t.Fatalf("got %+v", ps)
	}
	if got := StripCalls(text); got != "tail" {
		t.Errorf("StripCalls = %q", got)
	}
}

func BenchmarkParseHostile(b *testing.B) {
	for _, name := range []string{"opens", "opens+close", "calls"} {
		text := hostile(80_000)[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				Parse(text)
			}
		})
	}
}

func BenchmarkStripCalls(b *testing.B) {
	text := strings.Repeat("some words "+renderedCall, 1000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		StripCalls(text)
	}
}

const renderedCall = "<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT 1\"}}\n</tool_call>"
