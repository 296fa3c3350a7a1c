package model

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// tinyTestConfig is a small random model for fast tests.
func tinyTestConfig() *Config {
	c := TinyConfig(128, 1, 2)
	c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers, c.NumAttentionHeads, c.NumKeyValueHeads = 64, 96, 2, 4, 2
	c.InitializerRange = 0.2 // peaked distributions so greedy paths are not ties
	return c
}

// forwardTol is how far two float32 forward passes of a model with config c that order their arithmetic
// differently (KV-cached decoding, one position at a time, against the whole sequence at once) may put a
// log-prob lp: a few roundings of each layer's hidden-size dot products and of the vocabulary's sum, adding up
// as a random walk, relative to 1+|lp|.
func forwardTol(c *Config, lp float64) float64 {
	return 8 * eps32 * (math.Sqrt(float64(c.HiddenSize*c.NumHiddenLayers)) + math.Sqrt(float64(c.VocabSize))) * (1 + math.Abs(lp))
}

func newTestModel(t testing.TB, seed uint64) *Model {
	t.Helper()
	m, err := New(testBackend(t), tinyTestConfig(), seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var testPrompts = [][]int{{5, 9, 13}, {7, 7, 8, 20, 33, 41, 50, 3, 4}, {100}, {12, 11, 10, 9, 8, 7}}

// TestGreedyCacheMatchesNoCache: greedy decoding with the KV cache gives the same tokens as recomputing the whole
// sequence each step, also after tool-output tokens are appended to some sequences mid-way.
func TestGreedyCacheMatchesNoCache(t *testing.T) {
	m := newTestModel(t, 7)
	ctx := context.Background()
	const n = 12
	s, err := m.NewSession(len(testPrompts), 256, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(ctx, testPrompts); err != nil {
		t.Fatal(err)
	}
	got, err := s.Generate(ctx, SampleOptions{MaxNewTokens: n})
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.GreedyNoCache(ctx, testPrompts, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	for b := range testPrompts {
		if !slices.Equal(got[b].Tokens, want[b]) {
			t.Errorf("seq %d: cached %v, uncached %v", b, got[b].Tokens, want[b])
		}
		if got[b].Stop != StopLength {
			t.Errorf("seq %d: stop %q, want length", b, got[b].Stop)
		}
	}
	// Turn 2: tool output for sequences 0 and 2 only; the others stay stopped.
	tool := [][]int{{60, 61, 62, 63, 64}, nil, {70, 71}, nil}
	if err := s.Append(ctx, tool); err != nil {
		t.Fatal(err)
	}
	got2, err := s.Generate(ctx, SampleOptions{MaxNewTokens: n})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []int{1, 3} {
		if got2[b].Stop != "" || len(got2[b].Tokens) != 0 {
			t.Errorf("seq %d took part in turn 2 without new tokens: %+v", b, got2[b])
		}
	}
	for _, b := range []int{0, 2} {
		full := slices.Concat(testPrompts[b], got[b].Tokens, tool[b])
		if !slices.Equal(s.Tokens(b), slices.Concat(full, got2[b].Tokens)) {
			t.Errorf("seq %d: session tokens %v, want %v + %v", b, s.Tokens(b), full, got2[b].Tokens)
		}
		w, err := m.GreedyNoCache(ctx, [][]int{full}, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got2[b].Tokens, w[0]) {
			t.Errorf("seq %d turn 2: cached %v, uncached %v", b, got2[b].Tokens, w[0])
		}
	}
}

// TestSamplingLogProbsAndDeterminism: a seed fixes the samples; the returned log-probs equal the training graph's
// TokenLogProbsAt on the same tokens; stop ids end sequences independently.
func TestSamplingLogProbsAndDeterminism(t *testing.T) {
	m := newTestModel(t, 3)
	ctx := context.Background()
	opts := SampleOptions{Temperature: 0.8, TopP: 0.95, TopK: 40, MaxNewTokens: 10}
	sample := func(seed uint64, opts SampleOptions) []Completion {
		s, err := m.NewSession(len(testPrompts), 128, seed)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Append(ctx, testPrompts); err != nil {
			t.Fatal(err)
		}
		c, err := s.Generate(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b, c := sample(42, opts), sample(42, opts), sample(43, opts)
	differs := false
	for i := range a {
		if !slices.Equal(a[i].Tokens, b[i].Tokens) || !slices.Equal(a[i].LogProbs, b[i].LogProbs) {
			t.Errorf("seq %d: same seed gave %v and %v", i, a[i].Tokens, b[i].Tokens)
		}
		differs = differs || !slices.Equal(a[i].Tokens, c[i].Tokens)
	}
	if !differs {
		t.Errorf("seeds 42 and 43 sampled identical tokens")
	}

	// Log-probs agree with the training graph at the sampling temperature.
	var seqs [][]int
	for i := range a {
		seqs = append(seqs, slices.Concat(testPrompts[i], a[i].Tokens))
	}
	tokens, mask, err := PadBatch(seqs, 0, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	e, err := mlctx.NewExec(m.Backend, m.Ctx, func(ctx *mlctx.Context, tok, mask *graph.Node) (*graph.Node, *graph.Node) {
		return m.TokenLogProbsAt(ctx, tok, mask, opts.Temperature), m.TokenLogProbs(ctx, tok, mask)
	})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := e.Exec(tokens, mask)
	if err != nil {
		t.Fatal(err)
	}
	lpT, lp1 := outs[0].Value().([][]float32), outs[1].Value().([][]float32)
	maxDiff := 0.0
	for i := range a {
		T := len(lpT[i])
		for j := range a[i].Tokens {
			pos := T - len(a[i].Tokens) + j
			for _, p := range [][2]float32{{lpT[i][pos], a[i].LogProbs[j]}, {lp1[i][pos], a[i].RawLogProbs[j]}} {
				d := math.Abs(float64(p[0] - p[1]))
				maxDiff = max(maxDiff, d)
				if d > forwardTol(&m.Config, float64(p[0])) {
					t.Errorf("sequence %d token %d: sampler log-prob %g, training graph %g (bound %.3g)", i, j, p[1], p[0], forwardTol(&m.Config, float64(p[0])))
				}
			}
		}
	}
	t.Logf("max |sampler log-prob - TokenLogProbs| = %.3g", maxDiff)

	// Stop ids: stop each sequence at its first occurrence of a token it sampled above.
	stopOpts := opts
	stopOpts.Stop = []int{a[0].Tokens[2], a[1].Tokens[0]}
	d := sample(42, stopOpts)
	for i := range d {
		first := slices.IndexFunc(a[i].Tokens, func(x int) bool { return slices.Contains(stopOpts.Stop, x) })
		if first < 0 {
			if d[i].Stop != StopLength || !slices.Equal(d[i].Tokens, a[i].Tokens) {
				t.Errorf("seq %d: without a stop id got %+v", i, d[i])
			}
			continue
		}
		if d[i].Stop != StopToken || !slices.Equal(d[i].Tokens, a[i].Tokens[:first+1]) {
			t.Errorf("seq %d: stop at %d: got %v (%s), want %v", i, first, d[i].Tokens, d[i].Stop, a[i].Tokens[:first+1])
		}
	}
}

// TestPerSequenceBudgets: MaxNewTokensPer bounds each sequence; a zero budget keeps the turn for later; the
// tokens match a run with one shared budget (per-sequence random streams).
func TestPerSequenceBudgets(t *testing.T) {
	m := newTestModel(t, 5)
	ctx := context.Background()
	opts := SampleOptions{Temperature: 1, MaxNewTokens: 6}
	ref, err := m.NewSession(len(testPrompts), 128, 9)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	ref.Append(ctx, testPrompts)
	want, err := ref.Generate(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(len(testPrompts), 128, 9)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Append(ctx, testPrompts)
	budgets := []int{2, 6, 0, 4}
	got, err := s.Generate(ctx, SampleOptions{Temperature: 1, MaxNewTokensPer: budgets})
	if err != nil {
		t.Fatal(err)
	}
	for b, n := range budgets {
		if !slices.Equal(got[b].Tokens, want[b].Tokens[:n]) {
			t.Errorf("seq %d budget %d: got %v, want %v", b, n, got[b].Tokens, want[b].Tokens[:n])
		}
	}
	// Sequence 2 kept its turn.
	more, err := s.Generate(ctx, SampleOptions{Temperature: 1, MaxNewTokensPer: []int{0, 0, 3, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(more[2].Tokens, want[2].Tokens[:3]) || len(more[0].Tokens) != 0 {
		t.Errorf("deferred turn: got %+v, want seq 2 = %v", more, want[2].Tokens[:3])
	}
}

func TestSessionCapacity(t *testing.T) {
	m := newTestModel(t, 3)
	s, err := m.NewSession(2, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(context.Background(), [][]int{make([]int, 40), {1}}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Generate(context.Background(), SampleOptions{MaxNewTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	if c[0].Stop != StopCapacity || c[1].Stop != StopCapacity {
		t.Errorf("want capacity stops, got %s %s", c[0].Stop, c[1].Stop)
	}
	if err := s.Append(context.Background(), [][]int{{1, 2}, nil}); err == nil {
		t.Errorf("append beyond capacity succeeded")
	}
	// A closed session's cache is gone: it refuses to go on rather than decode from an empty one.
	s2, err := m.NewSession(2, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Append(context.Background(), [][]int{{1, 2}, {3}}); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if _, err := s2.Generate(context.Background(), SampleOptions{MaxNewTokens: 2}); !errors.Is(err, errClosed) {
		t.Errorf("generate after close: %v, want %v", err, errClosed)
	}
}

// TestLongPromptChunks: a prompt longer than one chunk (maxChunk) is fed in several graph calls and decoding
// still equals the uncached reference.
func TestLongPromptChunks(t *testing.T) {
	m := newTestModel(t, 11)
	ctx := context.Background()
	long := make([]int, maxChunk+88)
	for i := range long {
		long[i] = (i*13 + 5) % m.Config.VocabSize
	}
	prompts := [][]int{long, {4, 5, 6}}
	s, err := m.NewSession(2, 1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(ctx, prompts); err != nil {
		t.Fatal(err)
	}
	got, err := s.Generate(ctx, SampleOptions{MaxNewTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.GreedyNoCache(ctx, prompts, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for b := range prompts {
		if !slices.Equal(got[b].Tokens, want[b]) {
			t.Errorf("seq %d: cached %v, uncached %v", b, got[b].Tokens, want[b])
		}
	}
}

// TestConcurrentSessions: sessions of one model sampling at the same time (as concurrent rollouts do) give the
// same tokens as one after the other.
func TestConcurrentSessions(t *testing.T) {
	m := newTestModel(t, 13)
	ctx := context.Background()
	run := func(seed uint64) []Completion {
		s, err := m.NewSession(len(testPrompts), 128, seed)
		if err != nil {
			t.Error(err)
			return nil
		}
		defer s.Close()
		if err := s.Append(ctx, testPrompts); err != nil {
			t.Error(err)
			return nil
		}
		c, err := s.Generate(ctx, SampleOptions{Temperature: 1, MaxNewTokens: 8})
		if err != nil {
			t.Error(err)
		}
		return c
	}
	const n = 3
	want := make([][]Completion, n)
	for i := range n {
		want[i] = run(uint64(i))
	}
	got := make([][]Completion, n)
	done := make(chan int)
	for i := range n {
		go func() { got[i] = run(uint64(i)); done <- i }()
	}
	for range n {
		<-done
	}
	for i := range n {
		for b := range want[i] {
			if !slices.Equal(got[i][b].Tokens, want[i][b].Tokens) {
				t.Errorf("session %d seq %d: concurrent %v, sequential %v", i, b, got[i][b].Tokens, want[i][b].Tokens)
			}
		}
	}
}

// TestCacheWindow: the window the cache tensors hold covers the slots in use, is at most the capacity, and wastes
// at most 31 slots up to 256 and an eighth of the next power of two past that.
func TestCacheWindow(t *testing.T) {
	for _, slots := range []int{64, 192, 320, 4096} {
		prev := 0
		for need := 1; need <= slots; need++ {
			w := cacheWindow(need, slots)
			waste := 31
			if need > 256 {
				p := 512
				for p < need {
					p *= 2
				}
				waste = p/8 - 1
			}
			if w < need || w > slots || w < prev || (w-need > waste && w != slots) {
				t.Fatalf("cacheWindow(%d, %d) = %d", need, slots, w)
			}
			prev = w
		}
	}
}

// TestCacheWindowGrowth decodes sequences of different lengths up to the capacity, across every window the cache
// grows through (32 to 128 slots): greedy tokens equal the uncached reference's, and sampled log-probs equal the
// training graph's at every position.
func TestCacheWindowGrowth(t *testing.T) {
	m := newTestModel(t, 17)
	ctx := context.Background()
	toCapacity := func(opts SampleOptions) []Completion {
		s, err := m.NewSession(len(testPrompts), 100, 5) // 128 slots: the prompts take 16, decoding the other 112
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Append(ctx, testPrompts); err != nil {
			t.Fatal(err)
		}
		if s.window != 32 {
			t.Errorf("window %d after a 16-slot prompt chunk, want 32", s.window)
		}
		opts.MaxNewTokens = 1000
		c, err := s.Generate(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if s.window != 128 || s.Free() != 0 {
			t.Errorf("window %d, %d slots free at the end, want 128 and 0", s.window, s.Free())
		}
		for b := range c {
			if c[b].Stop != StopCapacity || len(c[b].Tokens) != 113 { // the last one sampled from the full cache
				t.Fatalf("seq %d: %d tokens, stop %q; want 113 and capacity", b, len(c[b].Tokens), c[b].Stop)
			}
		}
		return c
	}

	got := toCapacity(SampleOptions{})
	want, err := m.GreedyNoCache(ctx, testPrompts, len(got[0].Tokens), nil)
	if err != nil {
		t.Fatal(err)
	}
	for b := range testPrompts {
		if !slices.Equal(got[b].Tokens, want[b]) {
			t.Errorf("seq %d: cached %v, uncached %v", b, got[b].Tokens, want[b])
		}
	}

	sampled := toCapacity(SampleOptions{Temperature: 1})
	var seqs [][]int
	for i := range sampled {
		seqs = append(seqs, slices.Concat(testPrompts[i], sampled[i].Tokens))
	}
	tokens, mask, err := PadBatch(seqs, 0, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	e, err := mlctx.NewExec(m.Backend, m.Ctx, func(ctx *mlctx.Context, tok, mask *graph.Node) *graph.Node {
		return m.TokenLogProbs(ctx, tok, mask)
	})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := e.Exec(tokens, mask)
	if err != nil {
		t.Fatal(err)
	}
	lp := outs[0].Value().([][]float32)
	maxDiff := 0.0
	for i := range sampled {
		T := len(lp[i])
		for j := range sampled[i].Tokens {
			want := lp[i][T-len(sampled[i].Tokens)+j]
			d := math.Abs(float64(want - sampled[i].RawLogProbs[j]))
			maxDiff = max(maxDiff, d)
			if d > forwardTol(&m.Config, float64(want)) {
				t.Errorf("sequence %d token %d: sampler log-prob %g, training graph %g (bound %.3g)", i, j, sampled[i].RawLogProbs[j], want, forwardTol(&m.Config, float64(want)))
			}
		}
	}
	t.Logf("max |sampler log-prob - TokenLogProbs| over %d positions = %.3g", len(sampled[0].Tokens), maxDiff)
}
