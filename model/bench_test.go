package model

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	"github.com/mcprl/mcprl/internal/kernels"
)

// Benchmarks (not run by go test without -bench):
//
//	go test ./model -run '^$' -bench . -benchtime 3x
//
// BenchmarkTrainStep reports training throughput of the tiny default model (vocab 2048) at batch 8 x 256 tokens
// with forward + backward + AdamW, and its achieved FLOP/s as a ratio of the machine's float32 matmul ceiling,
// measured in the same run by OpenBLAS's cblas_sgemm (testdata/sgemm/sgemm.c, needs gcc and libopenblas-dev) on
// the model's own matmul shapes, and against the same step with internal/kernels' Go elementwise kernels
// switched off (simplego's own ops) and with everything switched off (stock simplego), three steps each.
// BenchmarkSampling reports new tokens/s at batch 8 with the KV cache and without. BenchmarkDecode times the
// sampling half of scripts/bench-vs-trl.sh (Model.Generate, as `mcprl model generate`) in wall and CPU time,
// and writes a per-op profile of it to $MCPRL_BENCH_OPTIME when that names a file.

// benchConfig is the embedded default's shape with the reduced tokenizer's vocabulary.
func benchConfig() *Config { return TinyConfig(2048, 1, 2) }

// sgemmCeiling compiles and runs the OpenBLAS probe on each (M, N, K) and returns the mean GFLOP/s.
func sgemmCeiling(b *testing.B, shapes [][3]int) float64 {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "sgemm")
	if out, err := exec.Command("gcc", "-O2", "testdata/sgemm/sgemm.c", "-o", bin, "-lopenblas").CombinedOutput(); err != nil {
		b.Skipf("cannot build the OpenBLAS sgemm probe (apt-get install gcc libopenblas-dev): %v\n%s", err, out)
	}
	sum := 0.0
	for _, s := range shapes {
		out, err := exec.Command(bin, strconv.Itoa(s[0]), strconv.Itoa(s[1]), strconv.Itoa(s[2]), "10").Output()
		if err != nil {
			b.Fatalf("sgemm probe: %v", err)
		}
		g, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			b.Fatal(err)
		}
		sum += g
	}
	return sum / float64(len(shapes))
}

// backendMatmulRate measures a backend's DotGeneral on each (M, N, K) (x [M,K] times w [N,K] transposed, as the
// model's linear layers), in float32 or as dot runs it with bf16 (the activation rounded to bfloat16 in the graph,
// the weight stored in bfloat16, the result widened back), on normal random inputs, best of 4 calls a shape, and
// returns the mean GFLOP/s.
func backendMatmulRate(b *testing.B, backend backends.Backend, shapes [][3]int, bf16 bool) float64 {
	b.Helper()
	e, err := graph.NewExec(backend, func(x, w *graph.Node) *graph.Node { return dot(bf16, x, []int{1}, nil, w, []int{1}, nil) })
	if err != nil {
		b.Fatal(err)
	}
	sum := 0.0
	for _, s := range shapes {
		rng := rand.New(rand.NewPCG(1, 2))
		xs, ws := make([]float32, s[0]*s[2]), make([]float32, s[1]*s[2])
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
		for i := range ws {
			ws[i] = float32(rng.NormFloat64())
		}
		x, w := tensors.FromFlatDataAndDimensions(xs, s[0], s[2]), tensors.FromFlatDataAndDimensions(ws, s[1], s[2])
		if bf16 {
			w = tensors.FromFlatDataAndDimensions(toBF16(ws), s[1], s[2])
		}
		best := time.Hour
		for range 4 {
			t0 := time.Now()
			out, err := e.Exec(x, w)
			if err != nil {
				b.Fatal(err)
			}
			best = min(best, time.Since(t0))
			out[0].FinalizeAll()
		}
		sum += 2 * float64(s[0]*s[1]*s[2]) / best.Seconds() / 1e9
	}
	return sum / float64(len(shapes))
}

// trainFLOPsPerToken is 6 x (matmul parameters, lm_head included) + 12 x layers x T x hidden (attention
// scores and values over the full T x T, forward and backward).
func trainFLOPsPerToken(c *Config, t int) float64 {
	d, kv := c.HiddenSize, c.NumKeyValueHeads*c.HeadDim()
	mm := c.NumHiddenLayers*(2*d*d+2*kv*d+3*d*c.IntermediateSize) + c.VocabSize*d
	return 6*float64(mm) + 12*float64(c.NumHiddenLayers*t*d)
}

func BenchmarkTrainStep(b *testing.B) {
	const batch, seqLen = 8, 256
	cfg := benchConfig()
	m, err := New(testBackend(b), cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	seqs := make([][]int, batch)
	for i := range seqs {
		for j := range seqLen {
			seqs[i] = append(seqs[i], (i*131+j*17)%cfg.VocabSize)
		}
	}
	tokens, mask, err := PadBatch(seqs, seqLen, 0, false)
	if err != nil {
		b.Fatal(err)
	}
	opt := optimizers.Adam().LearningRate(1e-4).WeightDecay(0.01).Done()
	step, err := mlctx.NewExec(m.Backend, m.Ctx, func(ctx *mlctx.Context, tokens, mask *graph.Node) *graph.Node {
		lp := m.TokenLogProbs(ctx, tokens, mask)
		loss := graph.Neg(graph.ReduceAllMean(lp))
		opt.UpdateGraph(ctx, tokens.Graph(), loss)
		return loss
	})
	if err != nil {
		b.Fatal(err)
	}
	run := func() {
		out, err := step.Exec(tokens, mask)
		if err != nil {
			b.Fatal(err)
		}
		out[0].FinalizeAll()
	}
	run() // compile
	shapes := [][3]int{{batch * seqLen, cfg.IntermediateSize, cfg.HiddenSize}, {batch * seqLen, cfg.HiddenSize, cfg.IntermediateSize},
		{batch * seqLen, cfg.VocabSize, cfg.HiddenSize}, {batch * seqLen, cfg.HiddenSize, cfg.HiddenSize}}
	before := sgemmCeiling(b, shapes)
	var times []float64
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		run()
		times = append(times, time.Since(t0).Seconds())
	}
	b.StopTimer()
	// The same step with parts of internal/kernels switched off, median of 3 each: simplego's own elementwise
	// ops (OpenBLAS kept), and stock simplego (its own matmul too).
	median3 := func() float64 {
		var ts []float64
		for range 3 {
			t0 := time.Now()
			run()
			ts = append(ts, time.Since(t0).Seconds())
		}
		sort.Float64s(ts)
		return ts[1]
	}
	noGoKernels, stock := 0.0, 0.0
	if m.Backend.Name() == simplego.BackendName && kernels.SetGoKernels(false) { // internal/kernels is simplego's only
		noGoKernels = median3()
		if kernels.SetOpenBLAS(false) {
			stock = median3()
			kernels.SetOpenBLAS(true)
		}
		kernels.SetGoKernels(true)
	}
	ceiling := (before + sgemmCeiling(b, shapes)) / 2
	gomlxMM := backendMatmulRate(b, m.Backend, shapes, false)
	sort.Float64s(times)
	med := times[len(times)/2]
	tokPerS := batch * seqLen / med
	gflops := tokPerS * trainFLOPsPerToken(cfg, seqLen) / 1e9
	b.ReportMetric(med, "s/step")
	b.ReportMetric(tokPerS, "tokens/s")
	b.ReportMetric(gflops, "GFLOP/s")
	b.ReportMetric(ceiling, "sgemm-GFLOP/s")
	b.ReportMetric(100*gflops/ceiling, "%-of-sgemm")
	b.ReportMetric(gomlxMM, "backend-matmul-GFLOP/s")
	if noGoKernels > 0 {
		b.ReportMetric(noGoKernels/med, "x-vs-simplego-elementwise")
		b.Logf("the same step on simplego's own elementwise ops (OpenBLAS matmuls): %.2f s/step; the Go kernels run it %.1fx faster", noGoKernels, noGoKernels/med)
	}
	if stock > 0 {
		b.ReportMetric(stock/med, "x-vs-stock-simplego")
		b.Logf("the same step on stock simplego (its own matmul and elementwise ops): %.2f s/step; %.1fx slower", stock, stock/med)
	}
	b.Logf("%d params, batch %dx%d: median %.2f s/step, %.0f tokens/s, %.1f GFLOP/s = %.1f%% of OpenBLAS sgemm %.1f GFLOP/s; "+
		"the backend's own matmul on the same shapes: %.1f GFLOP/s (the step reaches %.0f%% of it)",
		cfg.NumParams(), batch, seqLen, med, tokPerS, gflops, 100*gflops/ceiling, ceiling, gomlxMM, 100*gflops/gomlxMM)
}

func BenchmarkSampling(b *testing.B) {
	const batch, promptLen = 8, 32
	newTokens := 128
	if s := os.Getenv("MCPRL_BENCH_NEW_TOKENS"); s != "" {
		newTokens, _ = strconv.Atoi(s)
	}
	cfg := benchConfig()
	m, err := New(testBackend(b), cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	prompts := make([][]int, batch)
	for i := range prompts {
		for j := range promptLen - i { // different lengths
			prompts[i] = append(prompts[i], (i*31+j*7)%cfg.VocabSize)
		}
	}
	ctx := context.Background()
	cached := func() ([]Completion, time.Duration) {
		s, err := m.NewSession(batch, promptLen+newTokens+64, 1)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		t0 := time.Now()
		if err := s.Append(ctx, prompts); err != nil {
			b.Fatal(err)
		}
		c, err := s.Generate(ctx, SampleOptions{MaxNewTokens: newTokens})
		if err != nil {
			b.Fatal(err)
		}
		return c, time.Since(t0)
	}
	cached() // compile
	// Without the cache is slow: measure fewer tokens (the rate per token falls with length, so this favours it).
	uncachedN := min(newTokens, 32)
	if _, err := m.GreedyNoCache(ctx, prompts, uncachedN, nil); err != nil { // compile
		b.Fatal(err)
	}
	var withCache, without float64
	b.ResetTimer()
	for range b.N {
		c, d := cached()
		withCache += float64(batch*newTokens) / d.Seconds()
		t0 := time.Now()
		ref, err := m.GreedyNoCache(ctx, prompts, uncachedN, nil)
		if err != nil {
			b.Fatal(err)
		}
		without += float64(batch*uncachedN) / time.Since(t0).Seconds()
		for i := range ref {
			if !slices.Equal(ref[i], c[i].Tokens[:uncachedN]) {
				b.Fatalf("seq %d: cached and uncached greedy tokens differ", i)
			}
		}
	}
	b.StopTimer()
	withCache /= float64(b.N)
	without /= float64(b.N)
	b.ReportMetric(withCache, "cached-tokens/s")
	b.ReportMetric(without, "uncached-tokens/s")
	b.ReportMetric(withCache/without, "speedup")
	b.Logf("batch %d: %.0f new tokens/s with the KV cache (%d tokens), %.1f without (%d tokens): %.0fx",
		batch, withCache, newTokens, without, uncachedN, withCache/without)
}

// BenchmarkDecode is the sampling of scripts/bench-vs-trl.sh: 8 prompts of 32 tokens, 128 new tokens each,
// greedy, one KV-cache session (Model.Generate, which `mcprl model generate` runs), on the tiny default. It
// reports new tokens per second of wall time and per CPU second (user and system, every thread: on a machine
// shared with other jobs the second moves far less), and with $MCPRL_BENCH_OPTIME set writes the time of every
// op per decoded position (kernels.OpTimes) to that file.
func BenchmarkDecode(b *testing.B) {
	const batch, promptLen, newTokens = 8, 32, 128
	cfg := benchConfig()
	m, err := New(testBackend(b), cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	prompts := make([][]int, batch)
	for i := range prompts {
		for j := range promptLen {
			prompts[i] = append(prompts[i], (i*31+j*7)%cfg.VocabSize)
		}
	}
	generate := func() {
		if _, err := m.Generate(context.Background(), prompts, SampleOptions{MaxNewTokens: newTokens}, 1); err != nil {
			b.Fatal(err)
		}
	}
	generate() // compiles the prompt and decoding graphs
	var times *kernels.OpTimes
	if os.Getenv("MCPRL_BENCH_OPTIME") != "" {
		if times, err = kernels.StartOpTimes(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	t0, cpu0 := time.Now(), cpuSeconds()
	for range b.N {
		generate()
	}
	b.StopTimer()
	wall, cpu := time.Since(t0).Seconds(), cpuSeconds()-cpu0
	b.ReportMetric(float64(b.N*batch*newTokens)/wall, "tokens/s")
	b.ReportMetric(float64(b.N*batch*newTokens)/cpu, "tokens/cpu-s")
	if lib, err := kernels.OpenBLAS(); err == nil {
		if units, helped, stood := lib.CrewStats(); units > 0 {
			b.Logf("crew (%s=off to keep it off): helpers ran %.0f%% of the shared products' units; stood down %d times", kernels.EnvCrew, 100*float64(helped)/float64(units), stood)
		}
	}
	if times != nil {
		times.Stop()
		var out strings.Builder
		if err := times.Write(&out, b.N*newTokens, 60); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv("MCPRL_BENCH_OPTIME"), []byte(out.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuSeconds is the CPU time this process has used so far (user and system, all threads).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
