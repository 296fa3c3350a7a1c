package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzRoundTrip: for any valid UTF-8 text, decode(encode(s)) is s with NFC
// applied outside added tokens; encoding that again gives the same ids; all
// ids are in range; the small tokenizer round-trips the same way. Seed
// corpus: the 400 parity strings (and testdata/fuzz/FuzzRoundTrip).
//
//	go test ./tokenizer -run '^$' -fuzz FuzzRoundTrip -fuzztime 60s
func FuzzRoundTrip(f *testing.F) {
	for _, c := range parityCases(f) {
		f.Add(c.Text)
	}
	// Added tokens next to combining marks (NFC must not reach across them),
	// overlapping and partial added tokens, whitespace runs.
	for _, s := range []string{"<|im_end|>\u0338x", "e\u0301<|im_start|>\u0301", "<|im_<|im_end|>", "<tool_call></tool_call><|im_end|",
		"a \t\n\n  \r\n   b", "\u00a0\u3000 x", "<|endoftext|><|endoftext|>"} {
		f.Add(s)
	}
	tok := qwen(f)
	small, err := Small()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip("Encode takes text; invalid UTF-8 is read as U+FFFD")
		}
		want := normalizedText(tok, s)
		ids := tok.Encode(s)
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
		if got := tok.Decode(ids); got != want {
			t.Fatalf("decode(encode(%q)) = %q, want %q", s, got, want)
		}
		if again := tok.Encode(want); !slices.Equal(again, ids) {
			t.Fatalf("encode(decode(encode(%q))) = %v, encode = %v", s, again, ids)
		}
		// The heap merge for long pieces (longpiece.go) agrees with tiktoken-go.
		nfc := norm.NFC.String(s)
		if split, err := tok.encodeSplit(nil, nfc); err != nil || !slices.Equal(split, tok.core.EncodeOrdinary(nfc)) {
			t.Fatalf("heap merge of %q = %v (%v), tiktoken-go %v", nfc, split, err, tok.core.EncodeOrdinary(nfc))
		}
		if got := small.Decode(small.Encode(s)); got != want {
			t.Fatalf("small: decode(encode(%q)) = %q, want %q", s, got, want)
		}
		if d := tok.NewStreamDecoder(); true {
			var sb strings.Builder
			for _, id := range ids {
				sb.WriteString(d.Add(id))
			}
			sb.WriteString(d.Flush())
			if sb.String() != want {
				t.Fatalf("streamed %q, want %q", sb.String(), want)
			}
		}
	})
}
