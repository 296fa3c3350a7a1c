package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/internal/kernels"
)

// SampleOptions controls Session.Generate.
type SampleOptions struct {
	// Temperature divides the logits; 0 means greedy (argmax).
	Temperature float64
	// TopP keeps the smallest set of most likely tokens whose probability reaches TopP; 0 or 1 = off.
	TopP float64
	// TopK keeps the K most likely tokens; 0 = off.
	TopK int
	// MaxNewTokens bounds the tokens sampled per sequence in this call (> 0 unless MaxNewTokensPer covers all).
	MaxNewTokens int
	// MaxNewTokensPer, when not nil (one entry per sequence), bounds sequence i by MaxNewTokensPer[i] instead
	// where that entry is > 0; a sequence with entry 0 and MaxNewTokens 0 does not take part. Per-sequence budgets
	// keep every sampled token in the trajectory: nothing is sampled into the cache that a caller would cut off.
	MaxNewTokensPer []int
	// Stop ends a sequence when it samples one of these ids (the id is kept as its last token): pass the EOS ids
	// (Config.EOSIDs) and e.g. the id of </tool_call>.
	Stop []int
}

// StopReason says why a sequence stopped.
type StopReason string

const (
	// StopToken means the sequence sampled a stop id (its last token).
	StopToken StopReason = "stop"
	// StopLength means MaxNewTokens were sampled.
	StopLength StopReason = "length"
	// StopCapacity means the session's cache is full.
	StopCapacity StopReason = "capacity"
)

// Completion is what one sequence sampled in one Generate call.
type Completion struct {
	// Tokens are the sampled ids, the stop id included.
	Tokens []int
	// LogProbs[i] = log softmax(logits / Temperature)[Tokens[i]] over the full vocabulary, before top-k/top-p
	// filtering: TRL's old_per_token_logps convention, equal to TokenLogProbsAt(..., Temperature) under the same
	// weights. With Temperature 0 (greedy) it is taken at temperature 1.
	LogProbs []float32
	// RawLogProbs[i] = log softmax(logits)[Tokens[i]] (temperature 1).
	RawLogProbs []float32
	// Stop is why the sequence stopped; "" if it did not take part in the call.
	Stop StopReason
}

// ErrCapacity is returned by Append when the tokens do not fit in the session's cache.
var ErrCapacity = errors.New("session cache capacity exceeded")

// Session samples a batch of B sequences with a key/value cache. Each sequence grows by Append (prompts, tool
// output: fed through the model once, never re-encoded) and by Generate (sampled tokens). Sequences may have
// different lengths and stop independently. A Session is not safe for concurrent use; sessions of one model may
// run concurrently.
//
// The cache has a fixed number of slots (capacity, rounded up to a multiple of 64). Every Append of a chunk of
// K tokens (K = Bucket of the longest addition, or 1 per decoding step) uses K slots for all sequences, so
// capacity bounds the total of chunk lengths and decoding steps, not each sequence's length. The cache tensors
// hold only a window of the slots, grown as they fill (cacheWindow), because each step attends over the window.
type Session struct {
	m         *Model
	batch     int
	slots     int
	window    int // slots the cache tensors hold: the first window slots
	closed    bool
	cursor    int
	caches    []*tensors.Tensor // [B, kvHeads, window, headDim] each; nil before the first step
	slotValid []int32           // [B, slots]
	nextPos   []int
	seqs      [][]int      // every token of each sequence
	pending   [][]int      // sampled tokens not yet in the cache
	logits    [][]float32  // logits for the next token, when ready
	rngs      []*rand.Rand // one stream per sequence, so one sequence's stop does not shift another's samples
	scratch   sampleScratch
}

// NewSession starts a sampling session of batch sequences with room for capacity cache slots, sampling
// deterministically from seed (each sequence i draws from its own stream of (seed, i)).
func (m *Model) NewSession(batch, capacity int, seed uint64) (*Session, error) {
	if batch <= 0 || capacity <= 0 {
		return nil, fmt.Errorf("new session: batch %d and capacity %d must be > 0", batch, capacity)
	}
	slots := (capacity + 63) / 64 * 64
	s := &Session{
		m: m, batch: batch, slots: slots,
		slotValid: make([]int32, batch*slots),
		nextPos:   make([]int, batch),
		seqs:      make([][]int, batch),
		pending:   make([][]int, batch),
		logits:    make([][]float32, batch),
	}
	for b := range batch {
		s.rngs = append(s.rngs, rand.New(rand.NewPCG(seed, 0x73616d706c65+uint64(b)))) // "sample"+b
	}
	return s, nil
}

// cacheWindow is the number of slots the cache tensors hold when need slots are in use, at most slots: need
// rounded up to a multiple of 32 up to 256 slots, and to an eighth of the next power of two above that, so a
// step attends over at most 31 empty slots (at most an eighth of the window past 256), and a session of n slots
// compiles O(log n) decoding graphs.
func cacheWindow(need, slots int) int {
	step := 32
	for p := 256; p < need; p *= 2 {
		step *= 2
	}
	return min((need+step-1)/step*step, slots)
}

// reserve grows the cache tensors to hold at least need slots, copying the filled ones.
func (s *Session) reserve(need int) error {
	if need <= s.window && s.caches != nil {
		return nil
	}
	w := cacheWindow(need, s.slots)
	cfg := &s.m.Config
	rows, hd := s.batch*cfg.NumKeyValueHeads, cfg.HeadDim()
	grown := make([]*tensors.Tensor, 2*cfg.NumHiddenLayers)
	for i := range grown {
		grown[i] = tensors.FromShape(shapeF32(s.batch, cfg.NumKeyValueHeads, w, hd))
		if s.caches == nil {
			continue
		}
		var inner error
		err := tensors.MutableFlatData(grown[i], func(dst []float32) {
			inner = tensors.ConstFlatData(s.caches[i], func(src []float32) {
				for r := range rows { // each (sequence, head) row of slots
					copy(dst[r*w*hd:], src[r*s.window*hd:(r+1)*s.window*hd])
				}
			})
		})
		if err = errors.Join(err, inner); err != nil {
			return fmt.Errorf("grow cache to %d slots: %w", w, err)
		}
	}
	for _, c := range s.caches {
		c.FinalizeAll()
	}
	s.caches, s.window = grown, w
	return nil
}

// Tokens returns all tokens of sequence i so far (appended and sampled).
func (s *Session) Tokens(i int) []int { return slices.Clone(s.seqs[i]) }

// Free is the number of cache slots left.
func (s *Session) Free() int { return s.slots - s.cursor }

// Close releases the session's cache.
func (s *Session) Close() {
	for _, c := range s.caches {
		c.FinalizeAll()
	}
	s.caches, s.closed = nil, true
}

// errClosed is returned by Append and Generate after Close.
var errClosed = errors.New("session closed")

func (m *Model) getStepExec() (*mlctx.Exec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stepExec == nil {
		e, err := mlctx.NewExec(m.Backend, m.Ctx, func(ctx *mlctx.Context, inputs []*graph.Node) []*graph.Node {
			outs := m.decodeStep(ctx, inputs)
			aliasOutputs(inputs[4:], 1) // each donated cache is updated in place (outs[1:])
			return outs
		})
		if err != nil {
			return nil, fmt.Errorf("decode graph: %w", err)
		}
		// One graph per (batch, cache window, chunk) shape. Their number is bounded by the buckets (chunks are
		// bucketed, windows grow in multiples of 64) times the batch sizes a run uses; recovery branching samples
		// batches of every size up to recovery_max_branches_per_step x recovery_generations, with prefixes of
		// every length, and run 9 of the experiment passed 64 graphs at its step 40 ("maximum cache size of 64
		// reached"). GoMLX's cache evicts nothing, so it is unbounded here.
		m.stepExec = e.SetMaxCache(-1)
	}
	return m.stepExec, nil
}

// step feeds chunk[b] (at most k tokens, right-aligned; empty = nothing) and returns the logits [B][V] of the
// last position for the sequences that were fed.
func (s *Session) step(chunk [][]int, k int) error {
	if s.closed {
		return errClosed
	}
	if s.cursor+k > s.slots {
		return ErrCapacity
	}
	if err := s.reserve(s.cursor + k); err != nil {
		return err
	}
	exec, err := s.m.getStepExec()
	if err != nil {
		return err
	}
	tok := make([]int32, s.batch*k)
	pos := make([]int32, s.batch*k)
	for b, c := range chunk {
		off := k - len(c)
		for i, id := range c {
			tok[b*k+off+i] = int32(id)
			pos[b*k+off+i] = int32(s.nextPos[b] + i)
			s.slotValid[b*s.slots+s.cursor+off+i] = 1
		}
	}
	valid := make([]int32, s.batch*s.window)
	for b := range s.batch {
		copy(valid[b*s.window:(b+1)*s.window], s.slotValid[b*s.slots:])
	}
	args := []any{
		tensors.FromFlatDataAndDimensions(tok, s.batch, k),
		tensors.FromFlatDataAndDimensions(pos, s.batch, k),
		tensors.FromFlatDataAndDimensions(valid, s.batch, s.window),
		int32(s.cursor),
	}
	for _, c := range s.caches {
		d, err := graph.DonateTensorBuffer(c, s.m.Backend, 0)
		if err != nil {
			return fmt.Errorf("decode step: %w", err)
		}
		args = append(args, d)
	}
	outs, err := exec.Exec(args...)
	if err != nil {
		return fmt.Errorf("decode step: %w", err)
	}
	copy(s.caches, outs[1:])
	s.cursor += k
	logits, err := tensors.CopyFlatData[float32](outs[0])
	outs[0].FinalizeAll()
	if err != nil {
		return fmt.Errorf("decode step logits: %w", err)
	}
	v := s.m.Config.VocabSize
	for b, c := range chunk {
		if len(c) == 0 {
			continue
		}
		s.logits[b] = logits[b*v : (b+1)*v]
		s.nextPos[b] += len(c)
	}
	return nil
}

// maxChunk bounds the tokens fed per sequence in one graph call.
const maxChunk = 512

// Append feeds tokens[i] to sequence i (len(tokens) must be the batch size; an empty entry leaves that sequence
// alone): a prompt, or tool output after a stop. Tokens sampled by the previous Generate are fed first, as they
// were sampled. Afterwards, Generate continues exactly the sequences that received tokens.
func (s *Session) Append(ctx context.Context, tokens [][]int) error {
	if len(tokens) != s.batch {
		return fmt.Errorf("append: %d sequences given, session has %d", len(tokens), s.batch)
	}
	feed := make([][]int, s.batch)
	for b, t := range tokens {
		if len(t) == 0 {
			continue
		}
		for _, id := range t {
			if id < 0 || id >= s.m.Config.VocabSize {
				return fmt.Errorf("append: sequence %d: token id %d outside vocabulary of %d", b, id, s.m.Config.VocabSize)
			}
		}
		feed[b] = append(slices.Clone(s.pending[b]), t...)
	}
	added := tokens
	// Check the whole addition fits before changing any state.
	need, rest := 0, feed
	for {
		longest := 0
		for _, f := range rest {
			longest = max(longest, min(len(f), maxChunk))
		}
		if longest == 0 {
			break
		}
		need += min(Bucket(longest), maxChunk)
		next := make([][]int, len(rest))
		for b, f := range rest {
			next[b] = f[min(len(f), maxChunk):]
		}
		rest = next
	}
	if s.cursor+need > s.slots {
		return fmt.Errorf("append %d slots with %d free: %w", need, s.slots-s.cursor, ErrCapacity)
	}
	for b := range feed {
		if len(feed[b]) > 0 {
			s.pending[b] = nil
			s.logits[b] = nil
			s.seqs[b] = append(s.seqs[b], added[b]...)
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := make([][]int, s.batch)
		longest := 0
		for b, f := range feed {
			n := min(len(f), maxChunk)
			chunk[b], feed[b] = f[:n], f[n:]
			longest = max(longest, n)
		}
		if longest == 0 {
			return nil
		}
		if err := s.step(chunk, min(Bucket(longest), maxChunk)); err != nil {
			return err
		}
	}
}

// Generate samples until every sequence that received tokens (Append) since its last stop stops: on a Stop id,
// after its token budget, or when the cache is full. A sequence with a zero budget keeps its turn for a later
// call. It returns one Completion per sequence (Stop "" for those that
// did not take part). Sampling is deterministic for the session's seed and call sequence.
func (s *Session) Generate(ctx context.Context, opts SampleOptions) ([]Completion, error) {
	if opts.MaxNewTokensPer != nil && len(opts.MaxNewTokensPer) != s.batch {
		return nil, fmt.Errorf("generate: MaxNewTokensPer has %d entries, session has %d sequences", len(opts.MaxNewTokensPer), s.batch)
	}
	budget := make([]int, s.batch)
	for b := range budget {
		budget[b] = opts.MaxNewTokens
		if opts.MaxNewTokensPer != nil && opts.MaxNewTokensPer[b] > 0 {
			budget[b] = opts.MaxNewTokensPer[b]
		}
	}
	if opts.MaxNewTokens < 0 || (opts.MaxNewTokens == 0 && opts.MaxNewTokensPer == nil) {
		return nil, fmt.Errorf("generate: MaxNewTokens must be > 0")
	}
	if opts.Temperature < 0 || opts.TopP < 0 || opts.TopP > 1 || opts.TopK < 0 {
		return nil, fmt.Errorf("generate: invalid options temperature=%g top_p=%g top_k=%d", opts.Temperature, opts.TopP, opts.TopK)
	}
	out := make([]Completion, s.batch)
	active := make([]bool, s.batch)
	for b := range s.batch {
		active[b] = s.logits[b] != nil && budget[b] > 0
	}
	for {
		chunk := make([][]int, s.batch)
		any := false
		for b := range s.batch {
			if !active[b] {
				continue
			}
			tok, lp, raw := sampleToken(s.logits[b], &opts, s.rngs[b], &s.scratch)
			c := &out[b]
			c.Tokens = append(c.Tokens, tok)
			c.LogProbs = append(c.LogProbs, lp)
			c.RawLogProbs = append(c.RawLogProbs, raw)
			s.logits[b] = nil
			s.seqs[b] = append(s.seqs[b], tok)
			switch {
			case slices.Contains(opts.Stop, tok):
				c.Stop = StopToken
			case len(c.Tokens) >= budget[b]:
				c.Stop = StopLength
			case s.cursor >= s.slots:
				c.Stop = StopCapacity
			}
			if c.Stop != "" {
				active[b] = false
				s.pending[b] = []int{tok}
				continue
			}
			chunk[b] = []int{tok}
			any = true
		}
		if !any {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if err := s.step(chunk, 1); err != nil {
			return out, err
		}
	}
}

// sampleScratch is sampleToken's scratch, reused across calls.
type sampleScratch struct {
	x []float32 // shifted logits and their exponentials
	w []float64 // sampling weights
}

// exps sets x[i] = e^(logits[i]*scale - shift), in float32 on the kernels graphs run, and returns x.
func (sc *sampleScratch) exps(logits []float32, scale, shift float64) []float32 {
	if cap(sc.x) < len(logits) {
		sc.x = make([]float32, len(logits))
	}
	x := sc.x[:len(logits)]
	s, sh := float32(scale), float32(shift)
	for i, l := range logits {
		x[i] = l*s - sh
	}
	kernels.Exp(x, x)
	return x
}

// logSumExp is log Σ e^(logits[i]*scale) for scale > 0, as the training graph's float32 log-softmax computes it
// (the exponentials in float32), the sum in float64; best is the first index of the largest logit.
func (sc *sampleScratch) logSumExp(logits []float32, scale float64) (lse float64, best int) {
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	m := logits[best] * float32(scale)
	if math.IsInf(float64(m), 0) || math.IsNaN(float64(m)) {
		return float64(m), best
	}
	x := sc.exps(logits, scale, float64(m))
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += float64(x[i])
		s1 += float64(x[i+1])
		s2 += float64(x[i+2])
		s3 += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return float64(m) + math.Log((s0+s1)+(s2+s3)), best
}

// sampleToken draws a token from logits and returns it with its log-prob at the temperature (TRL's convention,
// untruncated) and at temperature 1.
func sampleToken(logits []float32, opts *SampleOptions, rng *rand.Rand, sc *sampleScratch) (tok int, logp, raw float32) {
	lse1, best := sc.logSumExp(logits, 1)
	if opts.Temperature == 0 {
		r := float32(float64(logits[best]) - lse1)
		return best, r, r
	}
	scale := 1 / opts.Temperature
	lseT := lse1
	if scale != 1 {
		lseT, _ = sc.logSumExp(logits, scale)
	}
	// Every weight once (the passes below read each up to three times).
	if cap(sc.w) < len(logits) {
		sc.w = make([]float64, len(logits))
	}
	w := sc.w[:len(logits)]
	for i, e := range sc.exps(logits, scale, lseT) {
		w[i] = float64(e)
	}
	// Candidates, most likely first when filtering.
	var cand []int
	if opts.TopK > 0 || (opts.TopP > 0 && opts.TopP < 1) {
		cand = make([]int, len(logits))
		for i := range cand {
			cand[i] = i
		}
		sort.SliceStable(cand, func(i, j int) bool { return logits[cand[i]] > logits[cand[j]] })
		if opts.TopK > 0 && opts.TopK < len(cand) {
			cand = cand[:opts.TopK]
		}
		if opts.TopP > 0 && opts.TopP < 1 {
			// Probabilities renormalized over the top-k survivors, as HF applies top-k then top-p.
			z := 0.0
			for _, i := range cand {
				z += w[i]
			}
			cum := 0.0
			for n, i := range cand {
				cum += w[i] / z
				if cum >= opts.TopP {
					cand = cand[:n+1]
					break
				}
			}
		}
	}
	total := 0.0
	if cand == nil {
		for _, x := range w {
			total += x
		}
	} else {
		for _, i := range cand {
			total += w[i]
		}
	}
	u := rng.Float64() * total
	tok = -1
	if cand == nil {
		for i, x := range w {
			u -= x
			if u < 0 {
				tok = i
				break
			}
		}
		if tok < 0 {
			tok = len(logits) - 1
		}
	} else {
		for _, i := range cand {
			u -= w[i]
			if u < 0 {
				tok = i
				break
			}
		}
		if tok < 0 {
			tok = cand[len(cand)-1]
		}
	}
	return tok, float32(float64(logits[tok])*scale - lseT), float32(float64(logits[tok]) - lse1)
}

func (m *Model) getLogitsExec() (*mlctx.Exec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.logitsExec == nil {
		e, err := mlctx.NewExec(m.Backend, m.Ctx, func(ctx *mlctx.Context, tokens, mask *graph.Node) *graph.Node {
			t := tokens.Shape().Dim(1)
			return graph.Squeeze(graph.SliceAxis(m.Logits(ctx, tokens, mask), 1, graph.AxisRange(t-1)), 1)
		})
		if err != nil {
			return nil, fmt.Errorf("logits graph: %w", err)
		}
		m.logitsExec = e.SetMaxCache(64)
	}
	return m.logitsExec, nil
}

// GreedyNoCache decodes greedily without a cache, running the full forward pass over every sequence (left-padded
// to a bucketed length) for each new token. It is the reference that cached decoding must match, and the
// baseline of the sampling benchmark. It returns the new tokens of each prompt (stop id included).
func (m *Model) GreedyNoCache(ctx context.Context, prompts [][]int, maxNew int, stop []int) ([][]int, error) {
	exec, err := m.getLogitsExec()
	if err != nil {
		return nil, err
	}
	seqs := make([][]int, len(prompts))
	for i, p := range prompts {
		seqs[i] = slices.Clone(p)
	}
	out := make([][]int, len(prompts))
	done := make([]bool, len(prompts))
	v := m.Config.VocabSize
	for range maxNew {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		tok, mask, err := PadBatch(seqs, 0, 0, true)
		if err != nil {
			return nil, err
		}
		res, err := exec.Exec(tok, mask)
		if err != nil {
			return nil, fmt.Errorf("greedy without cache: %w", err)
		}
		logits, err := tensors.CopyFlatData[float32](res[0])
		if err != nil {
			return nil, err
		}
		allDone := true
		for b := range seqs {
			if done[b] {
				continue
			}
			t, _, _ := sampleToken(logits[b*v:(b+1)*v], &SampleOptions{}, nil, &sampleScratch{})
			out[b] = append(out[b], t)
			seqs[b] = append(seqs[b], t)
			if slices.Contains(stop, t) {
				done[b] = true
			} else {
				allDone = false
			}
		}
		if allDone {
			break
		}
	}
	return out, nil
}
