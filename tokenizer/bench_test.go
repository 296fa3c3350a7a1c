package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
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
		for i := 0; i < b.N; i++ {
			for v, vr := range variants {
				start := time.Now()
				for _, s := range texts {
					vr.enc(s)
				}
				spent[v] += time.Since(start)
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
