package tokenizer

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestLongPiecePathMatchesTiktoken: the heap-merge path gives tiktoken-go's
// ids on every parity string and rendered prompt (forced through it), and on
// long runs that take it in Encode.
func TestLongPiecePathMatchesTiktoken(t *testing.T) {
	tok := qwen(t)
	texts, _ := benchCorpus(t)
	for _, s := range []string{
		strings.Repeat(" ", 1500), strings.Repeat(" ", 1500) + "x", "a" + strings.Repeat("\n", 500) + "b",
		strings.Repeat("-", 1500), strings.Repeat("=-", 750) + "\n\n", strings.Repeat("a", 1500),
		strings.Repeat("ab", 750), strings.Repeat("日本", 300), strings.Repeat("\t \u00a0", 400) + "end",
		"SELECT '" + strings.Repeat("x", 1000) + "' FROM t;" + strings.Repeat(" ", 200) + "|",
	} {
		if !hasLongRun(s) {
			t.Errorf("%.20q...: hasLongRun = false", s)
		}
		texts = append(texts, s)
	}
	for i, s := range texts {
		s = norm.NFC.String(s)
		want := tok.core.EncodeOrdinary(s)
		got, err := tok.encodeSplit(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("text %d %.40q: heap merge %v\n tiktoken %v", i, s, got, want)
		}
		if !slices.Equal(tok.EncodeOrdinary(s), want) {
			t.Errorf("text %d %.40q: EncodeOrdinary differs from tiktoken-go", i, s)
		}
	}
}
