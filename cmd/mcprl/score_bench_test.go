package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/mcprl/mcprl/reward"
)

// BenchmarkScoreSeedVsPython scores the same 50,000 completions with the
// user's Python function (reward/testdata/seed/harness.py batch: read the
// JSONL, call compute_mcp_reward on the batch, write one JSON line each)
// and with `mcprl score --reward compute_mcp_reward`, both as whole processes, runs
// interleaved so machine load falls on both alike. It checks that the two
// agree on every reward and reports each side's median wall and CPU time
// and the speed-ups. Run: scripts/bench-seed.sh (or go test ./cmd/mcprl
// -run '^$' -bench ScoreSeedVsPython -benchtime 5x).
func BenchmarkScoreSeedVsPython(b *testing.B) {
	py, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("python3 is not on PATH")
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "mcprl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	seedDir, corpus := benchCorpus(b, py, dir)
	pyOut, goOut := filepath.Join(dir, "py.jsonl"), filepath.Join(dir, "go.jsonl")
	run := func(out string, name string, args ...string) (wall, cpu time.Duration) {
		o, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		defer o.Close()
		cmd := exec.Command(name, args...)
		var msg bytes.Buffer
		cmd.Stdout, cmd.Stderr = o, &msg
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s: %v\n%s", name, err, msg.String())
		}
		wall = time.Since(start)
		return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	var pyWall, pyCPU, goWall, goCPU []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, c := run(pyOut, py, filepath.Join(seedDir, "harness.py"), "batch", corpus)
		pyWall, pyCPU = append(pyWall, w), append(pyCPU, c)
		w, c = run(goOut, bin, "score", "--reward", "compute_mcp_reward", "--completions", corpus, "-o", "/dev/stdout")
		goWall, goCPU = append(goWall, w), append(goCPU, c)
	}
	b.StopTimer()
	a, g := rewards(b, pyOut), rewards(b, goOut)
	if len(a) != 50000 || len(g) != len(a) {
		b.Fatalf("python scored %d, mcprl %d", len(a), len(g))
	}
	for i := range a {
		if a[i] != g[i] {
			b.Fatalf("completion %d: python %v, mcprl %v", i, a[i], g[i])
		}
	}
	med := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	b.ReportMetric(med(pyWall).Seconds(), "python-wall-s")
	b.ReportMetric(med(goWall).Seconds(), "mcprl-wall-s")
	b.ReportMetric(float64(med(pyWall))/float64(med(goWall)), "x-faster-wall")
	b.ReportMetric(float64(med(pyCPU))/float64(med(goCPU)), "x-less-cpu")
	b.ReportMetric(0, "ns/op")
}

// benchCorpus writes the 50,000 benchmark completions into dir.
func benchCorpus(b *testing.B, py, dir string) (seedDir, corpus string) {
	seedDir, _ = filepath.Abs(filepath.Join("..", "..", "reward", "testdata", "seed"))
	corpus = filepath.Join(dir, "bench.jsonl")
	f, err := os.Create(corpus)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	gen := exec.Command(py, filepath.Join(seedDir, "gen_corpus.py"), "bench", "50000")
	var genErr bytes.Buffer
	gen.Stdout, gen.Stderr = f, &genErr
	if err := gen.Run(); err != nil {
		b.Fatalf("gen_corpus: %v\n%s", err, genErr.String())
	}
	return seedDir, corpus
}

// BenchmarkScoreSeedInProcess is the scoring part of `mcprl score --reward
// seed` alone (no process start): the 50,000 completions on one worker,
// reported per completion.
func BenchmarkScoreSeedInProcess(b *testing.B) {
	py, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("python3 is not on PATH (it generates the corpus)")
	}
	_, corpus := benchCorpus(b, py, b.TempDir())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := (reward.ScoringConfig{Rewards: "compute_mcp_reward", Workers: 1}).ScoreFile(context.Background(), corpus, nil, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50000, "ns/completion")
}

func rewards(b *testing.B, path string) []float64 {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Reward float64 `json:"reward"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			b.Fatalf("%s: %v", path, err)
		}
		out = append(out, l.Reward)
	}
	return out
}
