package grpo

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/internal/kernels"
	"github.com/mcprl/mcprl/model"
)

// BenchmarkGRPOStep times one optimizer step of the trainer's own graphs (forward, backward, clipping and
// AdamW) on a batch of 8 sequences of 256 tokens whose last 128 are the sampled completion (loss mask 1): the
// mcprl half of scripts/bench-vs-trl.sh, which times TRL's step on the same model and batch. The model is
// $MCPRL_BENCH_MODEL (a model directory) or the default tiny Qwen2 over 2,048 ids. $MCPRL_BENCH_PROMPT and
// $MCPRL_BENCH_COMPLETION change the two lengths, and $MCPRL_BENCH_LORA_R > 0 trains a LoRA adapter of that
// rank (lora_alpha 2r, the default target modules) instead of every weight (scripts/bench-smollm2-step.sh), with
// lora_dropout $MCPRL_BENCH_LORA_DROPOUT percent (default 0), on the modules $MCPRL_BENCH_LORA_TARGETS lists
// (comma-separated, e.g. all-linear; default q_proj,v_proj) and with the token rows $MCPRL_BENCH_TOKENS lists
// (comma-separated ids; default none) trainable. $MCPRL_BENCH_GRADIENT_CHECKPOINTING=1 turns gradient_checkpointing
// on (the attention probabilities recomputed in the backward pass), and $MCPRL_BENCH_BF16=1 bf16 (XLA only).
// It reports the CPU time per step and the timed steps' peak resident memory (VmHWM, reset after the first step
// through /proc/self/clear_refs: loading and compiling are logged apart, and /usr/bin/time's peak covers them), and
// writes a per-op profile of the timed steps (kernels.OpTimes) to $MCPRL_BENCH_OPTIME when that names a file.
func BenchmarkGRPOStep(b *testing.B) {
	const batch = 8
	prompt, completion := benchEnvInt(b, "MCPRL_BENCH_PROMPT", 128), benchEnvInt(b, "MCPRL_BENCH_COMPLETION", 128)
	var m *model.Model
	var err error
	if dir := os.Getenv("MCPRL_BENCH_MODEL"); dir != "" {
		m, err = model.Load(benchBackend(b), dir)
	} else {
		m, err = model.New(benchBackend(b), model.TinyConfig(2048, 1, 2), 1)
	}
	if err != nil {
		b.Fatal(err)
	}
	cfg := Default()
	if r := benchEnvInt(b, "MCPRL_BENCH_LORA_R", 0); r > 0 {
		// lora_dropout $MCPRL_BENCH_LORA_DROPOUT percent, default 0, as the steps README reports were timed.
		cfg.UsePeft, cfg.LoraR, cfg.LoraAlpha = true, r, float64(2*r)
		cfg.LoraDropout = float64(benchEnvInt(b, "MCPRL_BENCH_LORA_DROPOUT", 0)) / 100
		if targets := os.Getenv("MCPRL_BENCH_LORA_TARGETS"); targets != "" {
			cfg.LoraTargetModules = strings.Split(targets, ",")
		}
		for _, id := range strings.FieldsFunc(os.Getenv("MCPRL_BENCH_TOKENS"), func(r rune) bool { return r == ',' }) {
			n, err := strconv.Atoi(id)
			if err != nil {
				b.Fatalf("$MCPRL_BENCH_TOKENS: %v", err)
			}
			cfg.TrainableTokens = append(cfg.TrainableTokens, n)
		}
		if err := m.AddLoRA(cfg.LoRA(), 1); err != nil {
			b.Fatal(err)
		}
	}
	cfg.GradientCheckpointing = benchEnvInt(b, "MCPRL_BENCH_GRADIENT_CHECKPOINTING", 0) != 0
	cfg.BF16 = benchEnvInt(b, "MCPRL_BENCH_BF16", 0) != 0
	cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumGenerations = batch, 1, batch
	cfg.LossType, cfg.LearningRate, cfg.MaxCompletionLength = LossDAPO, 1e-5, completion
	cfg.VLLMImportanceSamplingCorrection = false // sampled by the policy itself: no correction, as in TRL without vLLM
	t := &Trainer{Config: &cfg, Model: m}
	if err := t.compile(); err != nil {
		b.Fatal(err)
	}
	gen := &generation{length: prompt + completion, numItems: float32(batch * completion)}
	v := m.Config.VocabSize
	for i := range batch {
		tr := &chat.Trajectory{}
		for j := range prompt + completion {
			tr.Tokens = append(tr.Tokens, (i*131+j*17)%v)
			tr.Mask = append(tr.Mask, uint8(min(1, j/prompt)))
		}
		gen.trajs = append(gen.trajs, tr)
		gen.advantages = append(gen.advantages, float64(1-2*(i%2)))
	}
	step := func() {
		if _, _, _, err := t.optimizerStep(gen, 0, 1e-5); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	step() // compiles the graph for this shape
	b.Logf("first step (graph construction, differentiation and compilation included): %.2f s", time.Since(t0).Seconds())
	if kb, err := peakRSSKiB(); err == nil {
		b.Logf("peak RSS up to here (loading, compilation and the first step): %.0f MiB", float64(kb)/1024)
	}
	// From here VmHWM is the timed steps' own peak (what compiling took before is not counted).
	stepPeak := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	stopOpTimes := benchOpTimes(b)
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for range b.N {
		step()
	}
	b.StopTimer()
	stopOpTimes()
	// CPU time per step (user + system, every thread): on a machine whose other users take cores it moves far
	// less than the wall time, so before/after comparisons there read it.
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
	if kb, err := peakRSSKiB(); err == nil && stepPeak {
		b.ReportMetric(float64(kb)/1024, "step-peak-RSS-MiB")
	}
}

// benchBackend is the backend training runs on (model.NewBackend: internal/kernels' matmuls and elementwise
// kernels), not the tests' stock simplego.
func benchBackend(b *testing.B) backends.Backend {
	be, err := model.NewBackend("")
	if err != nil {
		b.Fatal(err)
	}
	return be
}

// benchEnvInt reads an integer setting of the benchmarks from the environment.
func benchEnvInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		b.Fatalf("$%s: %v", name, err)
	}
	return n
}

// benchOpTimes times every op from now on when $MCPRL_BENCH_OPTIME names a file; the returned function stops
// the timers and writes the profile there, per benchmark iteration.
func benchOpTimes(b *testing.B) (stop func()) {
	path := os.Getenv("MCPRL_BENCH_OPTIME")
	if path == "" {
		return func() {}
	}
	t, err := kernels.StartOpTimes()
	if err != nil {
		b.Fatal(err)
	}
	return func() {
		t.Stop()
		var out strings.Builder
		if err := t.Write(&out, b.N, 60); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
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

// peakRSSKiB is the process's peak resident set size (VmHWM in /proc/self/status, Linux).
func peakRSSKiB() (int, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, os.ErrNotExist
}
