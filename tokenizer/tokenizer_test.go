package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"
)

const qwenDir = "testdata/qwen2.5"

// The 7 MB tokenizer.json is parsed once per test binary.
var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenErr  error
)

func qwen(tb testing.TB) *Tokenizer {
	tb.Helper()
	qwenOnce.Do(func() { qwenTok, qwenErr = Load(qwenDir) })
	if qwenErr != nil {
		tb.Fatalf("Load(%s): %v", qwenDir, qwenErr)
	}
	return qwenTok
}

type parityCase struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func parityCases(tb testing.TB) []parityCase {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "parity", "qwen2.5_encode.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []parityCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c parityCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			tb.Fatalf("line %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(out) != 400 {
		tb.Fatalf("%d parity cases, want 400", len(out))
	}
	return out
}

func TestLoadQwen(t *testing.T) {
	tok := qwen(t)
	if got := tok.VocabSize(); got != 151665 {
		t.Errorf("VocabSize = %d, want 151665", got)
	}
	if got := tok.NumMerges(); got != 151387 {
		t.Errorf("NumMerges = %d, want 151387", got)
	}
	want := Specials{EOS: 151645, Pad: 151643, ImStart: 151644, ImEnd: 151645, ToolCallStart: 151657, ToolCallEnd: 151658, EndOfText: 151643}
	if got := tok.Specials(); got != want {
		t.Errorf("Specials = %+v, want %+v", got, want)
	}
	if !tok.IsSpecial(151645) || tok.IsSpecial(151657) || tok.IsSpecial(100) {
		t.Errorf("IsSpecial: <|im_end|> must be special, <tool_call> and id 100 not")
	}
	if id, ok := tok.TokenID("hello"); !ok || id != 14990 {
		t.Errorf(`TokenID("hello") = %d, %v; want 14990`, id, ok)
	}
	if _, ok := tok.TokenID("definitely-not-one-token-xyz"); ok {
		t.Error("TokenID of a multi-token string succeeded")
	}
}

// TestParityEncode reproduces the 400 reference encodings made by an
// independent byte-level BPE in Python.
func TestParityEncode(t *testing.T) {
	tok := qwen(t)
	bad := 0
	for i, c := range parityCases(t) {
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			bad++
			if bad <= 5 {
				t.Errorf("case %d %q:\n got  %v\n want %v", i+1, c.Text, got, c.IDs)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 400 encodings differ", bad)
	}
}

// TestParityRoundTrip: decode(encode(s)) gives s back, NFC-normalised (the
// tokenizer's normalizer; 17 of the strings are not NFC) outside added tokens.
func TestParityRoundTrip(t *testing.T) {
	tok := qwen(t)
	exact := 0
	for i, c := range parityCases(t) {
		got := tok.Decode(tok.Encode(c.Text))
		if want := normalizedText(tok, c.Text); got != want {
			t.Errorf("case %d: decode(encode(%q)) = %q, want %q", i+1, c.Text, got, want)
		}
		if got == c.Text {
			exact++
		}
		if norm.NFC.IsNormalString(c.Text) && got != c.Text {
			t.Errorf("case %d: NFC text %q did not round-trip", i+1, c.Text)
		}
	}
	if exact != 383 {
		t.Errorf("%d strings round-trip byte for byte, want 383 (the NFC ones)", exact)
	}
}

// normalizedText is what the tokenizer's normalizer makes of text: NFC
// outside the added tokens, which are matched in the raw text.
func normalizedText(tok *Tokenizer, text string) string {
	var out []byte
	for text != "" {
		loc := tok.addedRe.FindStringIndex(text)
		if loc == nil {
			loc = []int{len(text), len(text)}
		}
		out = append(out, norm.NFC.String(text[:loc[0]])...)
		out = append(out, text[loc[0]:loc[1]]...)
		text = text[loc[1]:]
	}
	return string(out)
}
