package tokenizer

import "unicode/utf8"

// StreamDecoder turns ids into text one at a time during generation. It holds
// back the bytes of a UTF-8 character that a later token will complete, so the
// text it emits never cuts a character; the concatenation of everything Add
// and Flush return equals Decode of all the ids.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder starts an incremental decoder.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t}
}

// Add appends one id and returns the text it completes ("" while a character
// is still incomplete). Unknown ids add nothing.
func (d *StreamDecoder) Add(id int) string {
	if b, ok := d.t.TokenBytes(id); ok {
		d.pending = append(d.pending, b...)
	}
	cut := completePrefix(d.pending)
	if cut == 0 {
		return ""
	}
	out := lossyUTF8(d.pending[:cut])
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return out
}

// Flush returns whatever is held back (an incomplete character becomes
// U+FFFD) and resets the decoder.
func (d *StreamDecoder) Flush() string {
	out := lossyUTF8(d.pending)
	d.pending = d.pending[:0]
	return out
}

// completePrefix is the length of b without a trailing incomplete-but-valid
// UTF-8 sequence (one that more bytes could still complete). Invalid bytes are
// not held: they can never become valid, and the replacement of a maximal
// invalid subpart does not depend on what follows it.
func completePrefix(b []byte) int {
	for back := 1; back <= utf8.UTFMax-1 && back <= len(b); back++ {
		i := len(b) - back
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}
