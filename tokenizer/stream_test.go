package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcprl/mcprl/chat"
)

// streamAll feeds ids one at a time and returns the chunks, Flush last.
func streamAll(tok *Tokenizer, ids []int) []string {
	d := tok.NewStreamDecoder()
	var chunks []string
	for _, id := range ids {
		chunks = append(chunks, d.Add(id))
	}
	return append(chunks, d.Flush())
}

// TestStreamDecoderParity: on every parity string, streaming emits only whole
// characters (no U+FFFD that the text lacks) and adds up to Decode.
func TestStreamDecoderParity(t *testing.T) {
	tok := qwen(t)
	split := 0
	for i, c := range parityCases(t) {
		chunks := streamAll(tok, c.IDs)
		if got, want := strings.Join(chunks, ""), tok.Decode(c.IDs); got != want {
			t.Fatalf("case %d: streamed %q, Decode %q", i+1, got, want)
		}
		for _, ch := range chunks {
			if strings.ContainsRune(ch, utf8.RuneError) && !strings.ContainsRune(c.Text, utf8.RuneError) {
				t.Errorf("case %d: chunk %q cuts a character", i+1, ch)
			}
		}
		for _, id := range c.IDs {
			if b, _ := tok.TokenBytes(id); !utf8.Valid(b) {
				split++
				break
			}
		}
	}
	if split < 10 {
		t.Errorf("only %d parity strings have a token that splits a character; the test would not exercise holding back", split)
	}
}

// TestStreamDecoderHoldsBack: a character spread over byte tokens appears
// when its last byte arrives, not before.
func TestStreamDecoderHoldsBack(t *testing.T) {
	tok := qwen(t)
	d := tok.NewStreamDecoder()
	var got []string
	for _, b := range []byte("a日😀") {
		id, ok := tok.TokenID(string([]byte{b}))
		if !ok {
			t.Fatalf("no byte token for 0x%02x", b)
		}
		got = append(got, d.Add(id))
	}
	want := []string{"a", "", "", "日", "", "", "", "😀"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("chunks %q, want %q", got, want)
	}
	// An incomplete character left at the end becomes U+FFFD on Flush, as in Decode.
	e6, _ := tok.TokenID("\xe6")
	if s := d.Add(e6); s != "" {
		t.Errorf("Add(0xE6) = %q, want it held back", s)
	}
	if s := d.Flush(); s != "\uFFFD" {
		t.Errorf("Flush = %q, want U+FFFD", s)
	}
}

// TestStreamDecoderRandom: random id sequences (byte tokens, invalid UTF-8
// included, mixed with whole tokens and specials) stream to exactly Decode,
// every chunk valid UTF-8.
func TestStreamDecoderRandom(t *testing.T) {
	tok := qwen(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 2000; n++ {
		ids := make([]int, rng.IntN(12))
		for i := range ids {
			if rng.IntN(3) == 0 {
				ids[i] = rng.IntN(tok.VocabSize())
			} else {
				ids[i] = rng.IntN(256)
			}
		}
		chunks := streamAll(tok, ids)
		if got, want := strings.Join(chunks, ""), tok.Decode(ids); got != want {
			t.Fatalf("ids %v: streamed %q, Decode %q", ids, got, want)
		}
		for _, ch := range chunks {
			if !utf8.ValidString(ch) {
				t.Fatalf("ids %v: chunk %q is not valid UTF-8", ids, ch)
			}
		}
	}
}

// TestDecodeReplacement: invalid bytes become U+FFFD per maximal subpart, as
// Python's bytes.decode("utf-8", "replace") does (values from CPython).
func TestDecodeReplacement(t *testing.T) {
	tok := qwen(t)
	for in, want := range map[string]string{
		"a\xe2\x82b":     "a\uFFFDb",
		"\xff\xfe":       "\uFFFD\uFFFD",
		"\xf0\x9f\x98":   "\uFFFD",
		"a\xed\xa0\x80b": "a\uFFFD\uFFFD\uFFFDb",
	} {
		var ids []int
		for _, b := range []byte(in) {
			id, _ := tok.TokenID(string([]byte{b}))
			ids = append(ids, id)
		}
		if got := tok.Decode(ids); got != want {
			t.Errorf("Decode(%q) = %q, want %q", in, got, want)
		}
		if got := string(tok.DecodeBytes(ids)); got != in {
			t.Errorf("DecodeBytes(%q) = %q", in, got)
		}
	}
}

// TestEncodeInvalidUTF8: an invalid byte in the text is encoded as U+FFFD.
func TestEncodeInvalidUTF8(t *testing.T) {
	tok := qwen(t)
	if got := tok.Decode(tok.Encode("a\xffb\xe6\x97")); got != "a\uFFFDb\uFFFD\uFFFD" {
		t.Errorf("Decode(Encode(invalid)) = %q", got)
	}
}

// TestConcurrentEncode: one Tokenizer and one Template serve several goroutines.
func TestConcurrentEncode(t *testing.T) {
	tok := qwen(t)
	tp, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	cases := parityCases(t)
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := g; i < len(cases); i += 4 {
				if got := tok.Encode(cases[i].Text); !slices.Equal(got, cases[i].IDs) {
					errs <- fmt.Sprintf("case %d differs under concurrency", i+1)
					return
				}
				if _, err := tp.Render([]chat.Message{{Role: "user", Content: cases[i].Text}}, nil, true); err != nil {
					errs <- err.Error()
					return
				}
			}
			errs <- ""
		}()
	}
	for g := 0; g < 4; g++ {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
