package pycompat

//go:generate sh -c "python3 gen_tables.py > tables_gen.go && gofmt -w tables_gen.go"

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// PythonVersion is the CPython version whose behaviour (and Unicode
// database) this package reproduces.
const PythonVersion = pythonVersion

// UnicodeVersion is that CPython's Unicode database version.
const UnicodeVersion = unicodeVersion

func inRanges(r rune, rs [][2]rune) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i][1] >= r })
	return i < len(rs) && rs[i][0] <= r
}

// IsSpace reports whether Python's str.isspace() is true for r.
func IsSpace(r rune) bool {
	if r < 0x80 {
		return r == ' ' || (r >= 0x09 && r <= 0x0D) || (r >= 0x1C && r <= 0x1F)
	}
	return inRanges(r, spaceRanges)
}

// Strip is Python's str.strip() with no arguments.
func Strip(s string) string {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if (r == utf8.RuneError && n <= 1) || !IsSpace(r) {
			break
		}
		s = s[n:]
	}
	for len(s) > 0 {
		r, n := utf8.DecodeLastRuneInString(s)
		if (r == utf8.RuneError && n <= 1) || !IsSpace(r) {
			break
		}
		s = s[:len(s)-n]
	}
	return s
}

func isCased(r rune) bool         { return inRanges(r, casedRanges) }
func isCaseIgnorable(r rune) bool { return inRanges(r, caseIgnorableRanges) }

// Lower is Python's str.lower(): the full lowercase mapping of every
// character (U+0130 becomes "i\u0307") and U+03A3 becomes final sigma
// U+03C2 in the Final_Sigma context, as CPython's handle_capital_sigma
// decides it. Bytes that are not UTF-8 (including WTF-8 surrogates) are kept.
func Lower(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteByte(s[i])
		case r < 0x80:
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteByte(byte(r))
		case r == 0x3A3:
			if finalSigma(s, i, i+n) {
				b.WriteRune(0x3C2)
			} else {
				b.WriteRune(0x3C3)
			}
		default:
			k := sort.Search(len(lowerKeys), func(k int) bool { return lowerKeys[k] >= r })
			if k < len(lowerKeys) && lowerKeys[k] == r {
				b.WriteString(lowerVals[k])
			} else {
				b.WriteString(s[i : i+n])
			}
		}
		i += n
	}
	return b.String()
}

// finalSigma is CPython's rule: \p{cased}\p{case-ignorable}* U+03A3
// !(\p{case-ignorable}* \p{cased}).
func finalSigma(s string, start, end int) bool {
	j := start
	found := false
	var c rune
	for j > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:j])
		if r == utf8.RuneError && n <= 1 {
			r = -1
		}
		j -= n
		if r < 0 || !isCaseIgnorable(r) {
			c, found = r, true
			break
		}
	}
	if !found || c < 0 || !isCased(c) {
		return false
	}
	for j = end; j < len(s); {
		r, n := utf8.DecodeRuneInString(s[j:])
		if r == utf8.RuneError && n <= 1 {
			return true // not ignorable, not cased
		}
		j += n
		if !isCaseIgnorable(r) {
			return !isCased(r)
		}
	}
	return true
}
