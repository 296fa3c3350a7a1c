package reward

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/internal/pycompat"
)

// python3 returns the interpreter's path; without one the test skips
// locally and fails under CI.
func python3(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 is not on PATH: the seed parity test needs it under CI")
		}
		t.Skip("python3 is not on PATH")
	}
	return p
}

// readCompletions decodes a completions JSONL file the way Python's
// json.loads does (lone surrogates kept), returning the completion texts.
func readCompletions(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		v, err := pycompat.Loads(line)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		c, ok := v.Get("completion")
		if !ok || c.Kind != pycompat.StrKind {
			t.Fatalf("%s:%d: no completion", path, i+1)
		}
		out = append(out, c.Str)
	}
	return out
}

type pyResult struct {
	Reward *float64 `json:"reward"`
	Error  string   `json:"error"`
	At     string   `json:"at"`
}

func runHarness(t *testing.T, py string, args ...string) []pyResult {
	t.Helper()
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", "seed", "harness.py"), "parity"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness: %v\n%s", err, stderr.String())
	}
	var res []pyResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r pyResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("harness output %q: %v", sc.Text(), err)
		}
		res = append(res, r)
	}
	return res
}

// documentedScore is the score mcprl gives where Python raises (see
// MCPRewardResult), by the line of compute_mcp_reward that raised.
func documentedScore(t *testing.T, at string) float64 {
	switch at {
	case "call_obj = json.loads(raw_json)", `tool_name = call_obj.get("name")`:
		return 0.1
	case `if tool_name == "query_database" and "inactive" in args.get("sql", "").lower():`:
		return 0.6
	}
	t.Fatalf("python raised at an unexpected line %q", at)
	return 0
}

// TestSeedParityWithPython runs the user's Python function itself over the
// committed corpus (536 completions, a third adversarial) and checks that
// mcprl's seed reward gives bit-identical scores, the same exception where
// Python raises, under the user's configuration and two per-task ones.
func TestSeedParityWithPython(t *testing.T) {
	py := python3(t)
	corpus := filepath.Join("testdata", "seed", "corpus.jsonl")
	texts := readCompletions(t, corpus)
	if len(texts) < 300 {
		t.Fatalf("corpus has %d completions, want a few hundred", len(texts))
	}
	configs := []struct {
		name string
		args []string
		cfg  MCPRewardConfig
	}{
		{"user", nil, DefaultMCPRewardConfig()},
		{"final-sigma", []string{"--keyword", "e\u03c2", "--catalog", "lookup,query_database"},
			MCPRewardConfig{Catalog: []string{"lookup", "query_database"}, Keyword: "e\u03c2"}},
		{"dotted-i", []string{"--keyword", "i\u0307n", "--catalog", "query_database"},
			MCPRewardConfig{Catalog: []string{"query_database"}, Keyword: "i\u0307n"}},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			want := runHarness(t, py, append([]string{corpus}, c.args...)...)
			if len(want) != len(texts) {
				t.Fatalf("python scored %d completions, corpus has %d", len(want), len(texts))
			}
			cfg := c.cfg.withDefaults()
			raised, mismatches := 0, 0
			for i, text := range texts {
				got := ComputeMCPReward(text, cfg)
				w := want[i]
				if w.Error != "" {
					raised++
					if got.PythonError != w.Error || got.Value != documentedScore(t, w.At) {
						mismatches++
						t.Errorf("line %d: python raised %q; mcprl %v (python error %q)", i+1, w.Error, got.Value, got.PythonError)
					}
					continue
				}
				if got.PythonError != "" || math.Float64bits(got.Value) != math.Float64bits(*w.Reward) {
					mismatches++
					t.Errorf("line %d: python %v, mcprl %v (%s, %q)\n%q", i+1, *w.Reward, got.Value, got.Stage, got.PythonError, clip(text))
				}
			}
			t.Logf("%d completions, %d where Python raises, %d mismatches", len(texts), raised, mismatches)
		})
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// TestSeedCorpusIsGenerated checks that the committed corpus is exactly
// what the committed generator writes.
func TestSeedCorpusIsGenerated(t *testing.T) {
	py := python3(t)
	out, err := exec.Command(py, filepath.Join("testdata", "seed", "gen_corpus.py"), "parity").Output()
	if err != nil {
		t.Fatalf("gen_corpus.py: %v", err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "seed", "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Fatal("testdata/seed/corpus.jsonl differs from `python3 gen_corpus.py parity`: regenerate it")
	}
}
