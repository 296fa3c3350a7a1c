package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchCorpus is a realistic mixed corpus: the 400 parity strings (BFCL
// questions and JSON function schemas, Spider SQL, Unicode and whitespace edge
// cases) and the 34 rendered chat prompts with tools and tool calls (~120 KB).
func benchCorpus(b *testing.B) ([]string, int64) {
	b.Helper()
	var texts []string
	for _, c := range parityCases(b) {
		texts = append(texts, c.Text)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "parity", "extra_renders.json"))
	if err != nil {
		b.Fatal(err)
	}
	var f struct {
		Cases []struct{ Rendered string } `json:"cases"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		b.Fatal(err)
	}
	for _, c := range f.Cases {
		texts = append(texts, c.Rendered)
	}
	var n int64
	for _, s := range texts {
		n += int64(len(s))
	}
	return texts, n
}

// BenchmarkEncode measures Encode throughput (MB/s) on the mixed corpus for
// the full Qwen2.5 vocabulary and the small one, against the baseline of raw
// tiktoken-go EncodeOrdinary on the same ranks (no added-token matching, no
// NFC), and reports each variant's speed relative to that baseline in the same run.
//
//	go test ./tokenizer -run '^$' -bench Encode -benchtime 20x
func BenchmarkEncode(b *testing.B) {
	tok := qwen(b)
	small, err := Small()
	if err != nil {
		b.Fatal(err)
	}
	texts, n := benchCorpus(b)
	variants := []struct {
		name string
		enc  func(string) []int
	}{
		{"baseline-tiktoken-raw", tok.core.EncodeOrdinary},
		{"full-151665", tok.Encode},
		{"small-2048", small.Encode},
	}
	b.Run("ratio", func(b *testing.B) {
		spent := make([]time.Duration, len(variants))
		// Interleaved text by text so that load from other processes falls on
		// all variants alike.
		for i := 0; i < b.N; i++ {
			for _, s := range texts {
				for v, vr := range variants {
					start := time.Now()
					vr.enc(s)
					spent[v] += time.Since(start)
				}
			}
		}
		mb := float64(n) * float64(b.N) / 1e6
		for v, vr := range variants {
			b.ReportMetric(mb/spent[v].Seconds(), vr.name+"-MB/s")
			if v > 0 {
				b.ReportMetric(spent[0].Seconds()/spent[v].Seconds(), vr.name+"-x-baseline")
			}
		}
	})
	for _, vr := range variants {
		b.Run(vr.name, func(b *testing.B) {
			b.SetBytes(n)
			for i := 0; i < b.N; i++ {
				for _, s := range texts {
					vr.enc(s)
				}
			}
		})
	}
}

// BenchmarkEncodeLongPiece shows the cost of one long pre-tokenizer piece (a
// run of spaces or of punctuation, which the split pattern keeps whole):
// tiktoken-go's merge loop is quadratic in the piece length, against the
// baseline of the same number of bytes of ordinary mixed text (the parity
// corpus, cut to size), in the same run.
//
//	go test ./tokenizer -run '^$' -bench EncodeLongPiece -benchtime 5x
func BenchmarkEncodeLongPiece(b *testing.B) {
	tok := qwen(b)
	texts, _ := benchCorpus(b)
	var mixed []byte
	for _, s := range texts {
		mixed = append(mixed, s...)
	}
	for _, n := range []int{1000, 4000, 16000} {
		inputs := map[string]string{
			"spaces":   strings.Repeat(" ", n),
			"dashes":   strings.Repeat("-", n),
			"baseline": strings.ToValidUTF8(string(mixed[:n]), ""),
		}
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			spent := map[string]time.Duration{}
			for i := 0; i < b.N; i++ {
				for _, name := range []string{"baseline", "spaces", "dashes"} {
					start := time.Now()
					tok.Encode(inputs[name])
					spent[name] += time.Since(start)
				}
			}
			for _, name := range []string{"baseline", "spaces", "dashes"} {
				b.ReportMetric(float64(spent[name].Microseconds())/float64(b.N), name+"-us")
			}
			b.ReportMetric(spent["spaces"].Seconds()/spent["baseline"].Seconds(), "spaces-x-baseline")
			b.ReportMetric(spent["dashes"].Seconds()/spent["baseline"].Seconds(), "dashes-x-baseline")
		})
	}
}
