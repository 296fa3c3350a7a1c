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
func benchCorpus(b testing.TB) ([]string, int64) {
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

// BenchmarkEncodeLongPiece: one long pre-tokenizer piece (a run of spaces or
// dashes, which the split pattern keeps whole). tiktoken-go merges it in
// quadratic time; Encode routes such text to the heap merge (longpiece.go).
// Reported per size: microseconds for the same number of bytes of ordinary
// mixed text (baseline), for the runs through Encode, and for the dashes
// through raw tiktoken-go, with the ratios, all in the same run.
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
		type variant struct {
			name string
			enc  func(string) []int
			text string
		}
		vs := []variant{
			{"baseline-mixed", tok.Encode, strings.ToValidUTF8(string(mixed[:n]), "")},
			{"spaces", tok.Encode, strings.Repeat(" ", n)},
			{"dashes", tok.Encode, strings.Repeat("-", n)},
			{"dashes-tiktoken-raw", tok.core.EncodeOrdinary, strings.Repeat("-", n)},
		}
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			spent := make([]time.Duration, len(vs))
			for i := 0; i < b.N; i++ {
				for j, v := range vs {
					start := time.Now()
					v.enc(v.text)
					spent[j] += time.Since(start)
				}
			}
			for j, v := range vs {
				b.ReportMetric(float64(spent[j].Microseconds())/float64(b.N), v.name+"-us")
			}
			b.ReportMetric(spent[2].Seconds()/spent[0].Seconds(), "dashes-x-baseline")
			b.ReportMetric(spent[3].Seconds()/spent[2].Seconds(), "tiktoken-raw-x-dashes")
		})
	}
}
