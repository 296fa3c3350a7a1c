package model_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
)

func tinyModel(t *testing.T) *model.Model {
	t.Helper()
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.TinyConfig(96, 1, 2)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 32, 64, 1
	m, err := model.New(backend, cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// logProbs is the model's per-token log-prob of every token of seq,
// computed over the whole sequence without a cache.
func logProbs(t *testing.T, m *model.Model, ids []int) []float32 {
	t.Helper()
	exec, err := mlctx.NewExec(m.Backend, m.Ctx, func(ctx *mlctx.Context, tokens, attn *graph.Node) *graph.Node {
		return m.TokenLogProbsAt(ctx, tokens, attn, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	n := model.Bucket(len(ids))
	tokens, attn, err := model.PadBatch([][]int{ids}, n, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec.Exec(tokens, attn)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float32](res[0])[:len(ids)]
}

// TestPolicyBudgetsAndContinuation: a sequence with a small budget samples
// no more than it (nothing it would not keep goes into the cache), an
// observation appended while the sequence sits out a Generate is kept,
// and every sampled log-prob equals the model's log-prob of that token in
// the sequence as the rollout records it (prompt, samples, observations).
func TestPolicyBudgetsAndContinuation(t *testing.T) {
	m := tinyModel(t)
	p := &model.Policy{M: m, Capacity: 512}
	ctx := context.Background()
	prompts := [][]int{{5, 6, 7, 8, 9}, {10, 11, 12}}
	b, err := p.NewBatch(ctx, prompts, policy.SampleOptions{Temperature: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seqs := [][]int{slices.Clone(prompts[0]), slices.Clone(prompts[1])}
	var sampledAt [2][]int
	record := func(out []policy.Sample, maxNew []int) {
		for i, s := range out {
			if len(s.IDs) > maxNew[i] || len(s.IDs) != len(s.LogProbs) {
				t.Fatalf("sequence %d: %d ids, %d log-probs for budget %d", i, len(s.IDs), len(s.LogProbs), maxNew[i])
			}
			for k := range s.IDs {
				sampledAt[i] = append(sampledAt[i], len(seqs[i])+k)
			}
			seqs[i] = append(seqs[i], s.IDs...)
		}
	}
	var lps [2][]float32
	gen := func(maxNew ...int) {
		out, err := b.Generate(ctx, maxNew)
		if err != nil {
			t.Fatal(err)
		}
		for i := range out {
			lps[i] = append(lps[i], out[i].LogProbs...)
		}
		record(out, maxNew)
	}
	gen(3, 20)
	if len(seqs[0]) != 8 || len(seqs[1]) != 23 {
		t.Fatalf("lengths %d %d", len(seqs[0]), len(seqs[1]))
	}
	obs := []int{40, 41, 42, 43}
	for i := range seqs {
		if err := b.Append(i, obs); err != nil {
			t.Fatal(err)
		}
		seqs[i] = append(seqs[i], obs...)
	}
	gen(5, 0) // sequence 1 sits this turn out; its observation waits
	gen(0, 6)
	for i := range seqs {
		want := logProbs(t, m, seqs[i])
		for k, pos := range sampledAt[i] {
			if d := math.Abs(float64(want[pos] - lps[i][k])); d > model.ForwardTol(&m.Config, float64(want[pos])) {
				t.Errorf("sequence %d token %d: sampled log-prob %g, model %g", i, pos, lps[i][k], want[pos])
			}
		}
	}
}

// TestPolicyCapacity: with CompletionSlots the cache is sized from the
// prompts; when an observation no longer fits, the sequences that wanted
// to continue get an empty, unstopped sample (out of budget) and the batch
// goes on, rather than failing.
func TestPolicyCapacity(t *testing.T) {
	m := tinyModel(t)
	// prompts of 5 tokens take 16 slots (the smallest bucket); 64 slots in all.
	p := &model.Policy{M: m, CompletionSlots: 30}
	ctx := context.Background()
	b, err := p.NewBatch(ctx, [][]int{{5, 6, 7, 8, 9}, {10, 11}}, policy.SampleOptions{Temperature: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	out, err := b.Generate(ctx, []int{20, 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(out[0].IDs) != 20 || len(out[1].IDs) != 20 {
		t.Fatalf("first turn: %d and %d tokens", len(out[0].IDs), len(out[1].IDs))
	}
	obs := make([]int, 40)
	for i := range obs {
		obs[i] = 20 + i
	}
	for i := range 2 {
		if err := b.Append(i, obs); err != nil {
			t.Fatal(err)
		}
	}
	out, err = b.Generate(ctx, []int{10, 10})
	if err != nil {
		t.Fatalf("a full cache failed the batch: %v", err)
	}
	for i, s := range out {
		if len(s.IDs) != 0 || s.Stopped {
			t.Errorf("sequence %d: %+v, want an empty unstopped sample", i, s)
		}
	}
}
