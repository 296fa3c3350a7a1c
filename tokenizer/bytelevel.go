package tokenizer

import (
	"fmt"
	"strings"
)

// The GPT-2 byte-level alphabet: tokenizer.json writes each byte of a token as
// one printable rune (bytes_to_unicode in GPT-2's encoder.py, which Hugging
// Face's ByteLevel pre-tokenizer and decoder use). No Go library exports it.
var byteToRune, runeToByte = byteLevelTables()

func byteLevelTables() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}

// byteLevelDecode turns a tokenizer.json vocabulary string into its raw bytes.
func byteLevelDecode(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := runeToByte[r]
		if !ok {
			return nil, fmt.Errorf("%q: rune %U is not in the byte-level alphabet", s, r)
		}
		out = append(out, b)
	}
	return out, nil
}

// ByteLevelEncode writes raw bytes in the byte-level alphabet, as tokenizer.json's vocabulary spells tokens
// ("Ġthe" for " the").
func ByteLevelEncode(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(byteToRune[c])
	}
	return sb.String()
}
