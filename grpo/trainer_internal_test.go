package grpo

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/train"
)

// trajectoryMetrics over four trajectories as the rollout records them: a
// malformed call is both a parse error and a failed call (the model reads
// an error), a tool's isError result is a failed call, Truncated marks a
// completion cut at max_completion_length, Error one ended by its sandbox.
func TestTrajectoryMetricsValues(t *testing.T) {
	traj := func(prompt, completion int) *chat.Trajectory {
		return &chat.Trajectory{Tokens: make([]int, prompt+completion), PromptLen: prompt}
	}
	ok := chat.CallResult{}
	malformed := chat.CallResult{ParseError: "invalid JSON", IsError: true}
	failed := chat.CallResult{IsError: true}

	a := traj(10, 20) // two turns: a malformed call, then a good one
	a.Turns = []chat.Turn{{Calls: []chat.CallResult{malformed}}, {Calls: []chat.CallResult{ok}}}
	b := traj(12, 64) // cut at the length limit after a call the tool rejected
	b.Truncated = true
	b.Turns = []chat.Turn{{Calls: []chat.CallResult{failed, ok}}}
	c := traj(10, 6) // answered without a call
	c.Turns = []chat.Turn{{}}
	d := traj(10, 30) // the tool server died
	d.Error = "tool query_database: connection reset"
	d.Turns = []chat.Turn{{Calls: []chat.CallResult{ok}}}

	m := trajectoryMetrics([]*chat.Trajectory{a, b, c, d})
	// 5 calls: 1 malformed, 2 failed (the malformed one and the rejected one), 3 fine.
	want := map[string]float64{
		"completion_length":           (20 + 64 + 6 + 30) / 4.0,
		"completions/mean_length":     (20 + 64 + 6 + 30) / 4.0,
		"completions/clipped_ratio":   1 / 4.0,
		"tools/call_frequency":        5 / 4.0,
		"tools/failure_frequency":     2 / 5.0,
		"tools/success_rate":          3 / 5.0,
		"tools/parse_error_rate":      1 / 5.0,
		"tools/trajectory_error_rate": 1 / 4.0,
	}
	for k, w := range want {
		if got, ok := m[k]; !ok || math.Abs(got-w) > 1e-12 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, w)
		}
	}
	if len(m) != len(want) {
		t.Errorf("metrics %v, want exactly %v", m, want)
	}

	// No call at all: the per-call rates are undefined (logged as null), the rest still count.
	m = trajectoryMetrics([]*chat.Trajectory{c})
	for _, k := range []string{"tools/failure_frequency", "tools/success_rate", "tools/parse_error_rate"} {
		if !math.IsNaN(m[k]) {
			t.Errorf("%s = %v with no calls, want NaN", k, m[k])
		}
	}
	if m["tools/call_frequency"] != 0 || m["completion_length"] != 6 {
		t.Errorf("no calls: call_frequency %v, completion_length %v; want 0, 6", m["tools/call_frequency"], m["completion_length"])
	}
}

// nextJobs draws prompts as TRL's RepeatSampler: each epoch is a seeded
// shuffle of the tasks, cut to whole generation batches, so an epoch never
// repeats a task; epochs are shuffled differently; the same seed draws the
// same order (a resumed run continues it from PromptCursor), another seed
// another order; shuffle_dataset false draws the tasks in file order.
func TestNextJobsOrder(t *testing.T) {
	fixtures, err := task.LoadFixtures("../examples/fixtures")
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandbox.NewFactory(context.Background(), fixtures["customers"], sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tasks := make([]task.Task, 8)
	for i := range tasks {
		tasks[i] = task.Task{ID: string(rune('a' + i)), Fixture: "customers"}
	}
	draw := func(seed int64, shuffle bool, count, batches int, st *train.State) [][]string {
		cfg := Default()
		cfg.Seed, cfg.ShuffleDataset = seed, shuffle
		tr := &Trainer{Config: &cfg, Tasks: tasks, Sandboxes: map[string]*sandbox.Factory{"customers": f}}
		var out [][]string
		for range batches {
			jobs, err := tr.nextJobs(st, count)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, j := range jobs {
				if j.Factory != f {
					t.Fatalf("task %s: factory %p, want the customers sandbox", j.Task.ID, j.Factory)
				}
				ids = append(ids, j.Task.ID)
			}
			out = append(out, ids)
		}
		return out
	}
	epoch := func(batches [][]string) []string { return slices.Concat(batches...) }

	// 8 tasks, 2 prompts a batch: 4 batches an epoch.
	seq := draw(42, false, 2, 8, &train.State{})
	if got := epoch(seq[:4]); !slices.Equal(got, []string{"a", "b", "c", "d", "e", "f", "g", "h"}) {
		t.Errorf("shuffle_dataset false: epoch 1 = %v, want file order", got)
	}
	if !slices.Equal(epoch(seq[4:]), epoch(seq[:4])) {
		t.Errorf("shuffle_dataset false: epoch 2 = %v, want file order again", epoch(seq[4:]))
	}

	s42 := draw(42, true, 2, 8, &train.State{})
	e1, e2 := epoch(s42[:4]), epoch(s42[4:])
	for i, e := range [][]string{e1, e2} {
		if s := slices.Sorted(slices.Values(e)); !slices.Equal(s, []string{"a", "b", "c", "d", "e", "f", "g", "h"}) {
			t.Errorf("epoch %d = %v: want every task once", i+1, e)
		}
	}
	if slices.Equal(e1, e2) {
		t.Errorf("epochs 1 and 2 drew the same order %v: each epoch is shuffled anew", e1)
	}
	if slices.Equal(e1, epoch(seq[:4])) {
		t.Errorf("shuffled epoch = file order %v", e1)
	}
	if again := draw(42, true, 2, 8, &train.State{}); !slices.Equal(epoch(again), epoch(s42)) {
		t.Errorf("seed 42 twice: %v then %v", epoch(s42), epoch(again))
	}
	if other := draw(43, true, 2, 8, &train.State{}); slices.Equal(epoch(other), epoch(s42)) {
		t.Errorf("seeds 42 and 43 drew the same order %v", epoch(s42))
	}
	// Resuming at batch 3 continues the same sequence.
	resumed := draw(42, true, 2, 5, &train.State{PromptCursor: 6})
	if !slices.Equal(epoch(resumed), epoch(s42[3:])) {
		t.Errorf("resumed at prompt 6: %v, want %v", epoch(resumed), epoch(s42[3:]))
	}

	// 3 prompts a batch: an epoch is 2 whole batches (6 prompts); the 2 tasks
	// left over are skipped that epoch, never carried into the next.
	s3 := draw(42, true, 3, 4, &train.State{})
	for i := 0; i < 4; i += 2 {
		e := epoch(s3[i : i+2])
		seen := map[string]bool{}
		for _, id := range e {
			if seen[id] {
				t.Errorf("epoch %d = %v repeats %s", i/2+1, e, id)
			}
			seen[id] = true
		}
	}
}

// lossColumns keeps the columns from the first loss position any row has, rounded down to a multiple of 64,
// up to maxLossStarts distinct (length, start) pairs, and the training step computes the same loss and gradient
// norm from them as from the whole sequence (the graph for the full mask computes every position's log-probs).
// The two graphs multiply matrices of other shapes, so they may round differently: the loss within two float32
// roundings of its sum's terms (eps32·√N·Σ|term|, N loss tokens), the gradient norm within 2·eps32·√(B·T) of it
// relative (every position feeds the gradient).
func TestLossColumns(t *testing.T) {
	const batch, prompt, completion = 4, 130, 62
	length := prompt + completion
	mask := make([]float32, batch*length)
	for b := range batch {
		for j := prompt + 7*b; j < length; j++ {
			mask[b*length+j] = 1
		}
	}
	full := tensors.FromFlatDataAndDimensions(mask, batch, length)
	tr := &Trainer{}
	tail := tr.lossColumns(full)
	if got := tail.Shape().Dimensions; !slices.Equal(got, []int{batch, length - 128}) {
		t.Fatalf("lossColumns kept %v, want [%d %d]", got, batch, length-128)
	}
	if got, want := tensors.MustCopyFlatData[float32](tail)[(length-128)*3:], mask[3*length+128:]; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	for _, m := range [][]float32{make([]float32, batch*length), mask[:batch*60]} {
		x := tensors.FromFlatDataAndDimensions(m, batch, len(m)/batch)
		if tr.lossColumns(x) != x {
			t.Errorf("mask of %d columns starting at %d: cut", len(m)/batch, slices.Index(m, 1))
		}
	}
	// Past maxLossStarts pairs, new ones keep every column; pairs seen before still start late. Width 192 with
	// the loss from column 128 on is the pair above.
	for n := range maxLossStarts + 2 {
		width := 192 + 64*n
		m := make([]float32, batch*width)
		m[width-1] = 1
		x := tensors.FromFlatDataAndDimensions(m, batch, width)
		want := 64
		if n >= maxLossStarts {
			want = width
		}
		if got := tr.lossColumns(x).Shape().Dim(1); got != want {
			t.Errorf("width %d, loss from column %d: kept %d columns, want %d", width, width-1, got, want)
		}
	}
	if got := tr.lossColumns(full).Shape().Dim(1); got != length-128 {
		t.Errorf("a pair seen before: kept %d columns, want %d", got, length-128)
	}

	step := func(mask *tensors.Tensor) (loss, norm float32) {
		m, err := model.New(benchlessBackend(t), model.TinyConfig(300, 1, 2), 3)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumGenerations = batch, 1, batch
		cfg.LossType, cfg.MaxCompletionLength, cfg.Temperature = LossDAPO, completion, 0.9
		cfg.VLLMImportanceSamplingCorrection = false
		tr := &Trainer{Config: &cfg, Model: m}
		if err := tr.compile(); err != nil {
			t.Fatal(err)
		}
		ids := make([]int32, batch*length)
		for i := range ids {
			ids[i] = int32((i*131 + i/length*17) % 300)
		}
		ones := make([]int32, batch*length)
		for i := range ones {
			ones[i] = 1
		}
		res, err := tr.apply.Exec(tensors.FromFlatDataAndDimensions(ids, batch, length), tensors.FromFlatDataAndDimensions(ones, batch, length),
			mask, tensors.FromFlatDataAndDimensions([]float32{1, -1, 0.5, -0.5}, batch), float32(batch*completion), float32(1e-3))
		if err != nil {
			t.Fatal(err)
		}
		return tensors.ToScalar[float32](res[0]), tensors.ToScalar[float32](res[len(res)-1])
	}
	wantLoss, wantNorm := step(full)
	gotLoss, gotNorm := step(tail)
	// With one iteration the policy ratio is exactly 1: each loss token adds -advantage/numItems.
	advantages, scale, tokens := []float64{1, -1, 0.5, -0.5}, 0.0, 0.0
	for i, m := range mask {
		scale += math.Abs(advantages[i/length]) * float64(m) / float64(batch*completion)
		tokens += float64(m)
	}
	lossBound := 2 * eps32 * math.Sqrt(tokens) * scale
	normBound := 2 * eps32 * math.Sqrt(float64(batch*length)) * float64(wantNorm)
	t.Logf("from column 128: loss %v, grad norm %v; whole sequence: %v, %v; bounds %.3g, %.3g", gotLoss, gotNorm, wantLoss, wantNorm, lossBound, normBound)
	if math.Abs(float64(gotLoss-wantLoss)) > lossBound || math.Abs(float64(gotNorm-wantNorm)) > normBound || wantNorm == 0 {
		t.Errorf("from column 128: loss %v, grad norm %v; whole sequence: %v, %v", gotLoss, gotNorm, wantLoss, wantNorm)
	}
}

// benchlessBackend is the backend training uses (model.NewBackend).
func benchlessBackend(t *testing.T) backends.Backend {
	be, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// With num_iterations 1 and one optimizer step per generation batch the training graph computes the
// importance-sampling correction from its own forward pass; the step's loss, gradient norm and sampling/*
// metrics equal those of the separate forward pass and Config.ImportanceSampling (num_iterations 2, one
// step), for sampler log-probs that move ratios below 1, near 1 and (masked) above the clip, over two
// micro-batches. The training graph's forward pass is not the separate one (other shapes, other op order), so
// each log-prob may round differently; the bounds are derived from the fixture's own magnitudes (isBounds).
func TestImportanceSamplingInTrainingGraph(t *testing.T) {
	const batch, prompt, completion = 8, 64, 64
	length := prompt + completion
	var bounds isBounds
	run := func(iterations int) (loss, norm float64, metrics map[string]float64) {
		m, err := model.New(benchlessBackend(t), model.TinyConfig(300, 1, 2), 5)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumGenerations = batch/2, 2, batch
		cfg.NumIterations, cfg.LossType, cfg.MaxCompletionLength = iterations, LossDAPO, completion
		tr := &Trainer{Config: &cfg, Model: m}
		if err := tr.compile(); err != nil {
			t.Fatal(err)
		}
		gen := &generation{length: length, numItems: float32(batch * completion), metrics: map[string]float64{}}
		for i := range batch {
			tj := &chat.Trajectory{}
			for j := range length {
				tj.Tokens = append(tj.Tokens, (i*131+j*17)%300)
				tj.Mask = append(tj.Mask, uint8(min(1, j/(prompt+i))))
			}
			gen.trajs = append(gen.trajs, tj)
			gen.advantages = append(gen.advantages, float64(1-2*(i%2))*(1+float64(i)/8))
		}
		// The sampler's log-probs: the policy's own, moved per sequence by -0.01, 0, -0.05 or +0.02 a token.
		own, err := tr.batchLogProbs(tr.logProbs, gen)
		if err != nil {
			t.Fatal(err)
		}
		for i, tj := range gen.trajs {
			shift := []float32{-0.01, 0, -0.05, 0.02}[i%4]
			for j := range length {
				tj.OldLogProbs = append(tj.OldLogProbs, own[i*length+j]+shift*float32(tj.Mask[j]))
			}
		}
		if cfg.NeedsOldLogProbs() {
			gen.old = own
		}
		sampling, mask := gen.samplingLogProbs(&cfg)
		if cfg.NeedsOldLogProbs() {
			gen.isRatio, metrics = cfg.ImportanceSampling(gen.old, sampling, mask, batch, length)
			bounds = newISBounds(own, mask, gen.isRatio, gen.advantages, batch, length, float64(gen.numItems))
		} else {
			gen.isRatio = sampling
		}
		loss, norm, stepMetrics, err := tr.optimizerStep(gen, 0, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		if metrics == nil {
			metrics = stepMetrics[len(stepMetrics)-1]
		}
		return loss, norm, metrics
	}
	wantLoss, wantNorm, wantMetrics := run(2)
	gotLoss, gotNorm, gotMetrics := run(1)
	t.Logf("in the graph: loss %v, grad norm %v, %v", gotLoss, gotNorm, gotMetrics)
	t.Logf("separately:   loss %v, grad norm %v, %v", wantLoss, wantNorm, wantMetrics)
	t.Logf("bounds: loss %.3g, grad norm %.3g (relative), ratios %.3g (relative), log-prob differences %.3g",
		bounds.loss, bounds.relative, bounds.relative, bounds.logProb)
	if math.Abs(gotLoss-wantLoss) > bounds.loss || math.Abs(gotNorm-wantNorm) > bounds.relative*wantNorm || wantNorm == 0 {
		t.Errorf("in the graph: loss %v, grad norm %v; separately: %v, %v", gotLoss, gotNorm, wantLoss, wantNorm)
	}
	if len(gotMetrics) != len(wantMetrics) {
		t.Fatalf("metrics %v, want %v", gotMetrics, wantMetrics)
	}
	for k, w := range wantMetrics {
		bound := bounds.relative * math.Abs(w)
		if strings.HasPrefix(k, "sampling/sampling_logp_difference/") {
			bound = bounds.logProb
		}
		if g, ok := gotMetrics[k]; !ok || math.Abs(g-w) > bound {
			t.Errorf("%s = %v (present %v), want %v (bound %.3g)", k, g, ok, w, bound)
		}
	}
	if wantMetrics["sampling/importance_sampling_ratio/min"] != 0 || wantMetrics["sampling/importance_sampling_ratio/max"] < 1.001 {
		t.Errorf("ratios %v: the fixture should mask a sequence and keep one above 1", wantMetrics)
	}
}

// isBounds are how far two float32 computations of a DAPO step with the importance-sampling correction may
// differ when their forward passes round each log-prob differently (other shapes, op order, CPU or matmul
// engine). A log-prob of magnitude |l| rounds by about eps32·|l|; over a sequence those independent roundings add
// up as a random walk to E_s = eps32·√(Σ_t l_t²), which moves the sequence's ratio exp(Σ_t (old_t - sampling_t)),
// and so its share of the loss and of the gradient, by the factor E_s. Each bound is twice that plus the rounding
// of the loss's own sum over N tokens (eps32·√N of its magnitude), so it scales with the fixture, not with a CPU.
type isBounds struct {
	loss     float64 // absolute, on the loss
	relative float64 // relative, on the gradient norm and the ratios' statistics
	logProb  float64 // absolute, on the log-prob differences' statistics
}

func newISBounds(logProbs, mask, ratio []float32, advantages []float64, batch, length int, numItems float64) isBounds {
	var b isBounds
	var weighted, scale, tokens, maxE, maxLP float64
	for s := range batch {
		sq, n := 0.0, 0.0
		for t := range length {
			i := s*length + t
			if mask[i] == 0 {
				continue
			}
			l := float64(logProbs[i])
			sq += l * l
			maxLP = max(maxLP, math.Abs(l))
			n++
		}
		e := eps32 * math.Sqrt(sq)
		r := 0.0
		if n > 0 {
			r = float64(ratio[s*length+length-1])
		}
		w := math.Abs(advantages[s]) * r * n / numItems // the sequence's share of |loss|
		weighted += w * e
		scale += w
		tokens += n
		maxE = max(maxE, e)
	}
	rounding := eps32 * math.Sqrt(tokens)
	b.loss = 2 * (weighted + rounding*scale)
	b.relative = 2 * (maxE + rounding)
	b.logProb = 2 * eps32 * maxLP
	return b
}
