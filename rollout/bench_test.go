package rollout_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/tokenizer"
)

// Benchmarks (not run by go test without -bench):
//
//	go test ./rollout -run '^$' -bench . -benchtime 3x
//
// Both use the embedded default policy's shape (model.TinyConfig: 4 layers,
// hidden 256, the small tokenizer's 2,048 ids) with its lm_head set so that
// it greedily writes a well-formed query_database call every turn (its
// layers' output projections zeroed, so the chain is exact; the compute is
// the same) (the
// sandbox answers each over MCP), 3 turns per trajectory
// (max_tool_calling_iterations 2), on the seed task and its live sandbox.

// benchModel is the default tiny policy shape, untied, writing the chain.
func benchModel(b *testing.B) (*model.Model, []int) {
	b.Helper()
	tok, _ := smallTokenizer(b)
	backend, err := model.NewBackend("")
	if err != nil {
		b.Fatal(err)
	}
	cfg := model.TinyConfig(tokenizer.SmallVocabSize, -1, tokenID(b, tok, "<|im_end|>"))
	cfg.TieWordEmbeddings = false
	m, err := model.New(backend, cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	nl := tokenID(b, tok, "\n")
	stop := tokenID(b, tok, "</tool_call>")
	body := distinctIDs(b, tok, "<tool_call>{\"name\": \"query_database\"\n}", nl, stop)
	chain := append(append([]int{nl}, body...), stop)
	// Layers write nothing into the residual stream (their outputs'
	// projections are zero: same compute, exact chain) so that the deeper
	// model follows the chain too.
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		for _, v := range []string{"self_attn/o_proj", "mlp/down_proj"} {
			w := m.Ctx.GetVariableByScopeAndName(fmt.Sprintf("/model/layers/%d/%s", l, v), "weight")
			if w == nil {
				b.Fatalf("no variable %s of layer %d", v, l)
			}
			if err := w.SetValue(tensors.FromShape(w.Shape())); err != nil {
				b.Fatal(err)
			}
		}
	}
	return chainWeights(b, m, chain), chain
}

// The rollout limits of examples/customers/quick.yaml, with room for three
// turns of the chain (max_completion_length 192 instead of 96).
const (
	benchCompletion = 192
	// benchCapacity is the capacity grpo's trainer used before 65c5676:
	// Bucket(max_prompt_length) + turns*max_completion_length + iterations*Bucket(max_completion_length).
	benchCapacity = 512 + 3*benchCompletion + 2*256
	// benchCompletionSlots is grpo's completionSlots since then (the
	// actual prompts' bucket is added by model.Policy):
	// 2*max_completion_length + iterations*Bucket(max_completion_length).
	benchCompletionSlots = 2*benchCompletion + 2*256
)

func benchRun(b *testing.B, p policy.Policy, f *sandbox.Factory, n int) []*rollout.Result {
	r := runner(b, p, rollout.Config{NumGenerations: n, MaxPromptLength: 512, MaxCompletionLength: benchCompletion, MaxToolCallingIterations: 2})
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		b.Fatal(err)
	}
	for _, tr := range trajs {
		if tr.Error != "" || len(tr.Turns) != 3 || len(tr.Calls()) != 3 {
			b.Fatalf("unexpected trajectory: error %q, %d turns, %d calls: %q", tr.Error, len(tr.Turns), len(tr.Calls()), tr.Completion())
		}
	}
	return trajs
}

// BenchmarkRolloutBatchedVsSequential: wall time of N=8 trajectories run by
// one Runner (concurrent sandboxes, sampling batched across them) against
// the same 8 trajectories run one after another (N=1 each), measured
// alternately in the same run. speedup = sequential / batched.
func BenchmarkRolloutBatchedVsSequential(b *testing.B) {
	const n = 8
	m, _ := benchModel(b)
	f := newFactory(b, loadFixture(b, customersDir), sandbox.Options{})
	p := &model.Policy{M: m, CompletionSlots: benchCompletionSlots}
	benchRun(b, p, f, n) // compile the decode graphs for both shapes once
	benchRun(b, p, f, 1)
	var batched, sequential time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		benchRun(b, p, f, n)
		batched += time.Since(start)
		start = time.Now()
		for k := 0; k < n; k++ {
			benchRun(b, p, f, 1)
		}
		sequential += time.Since(start)
	}
	b.ReportMetric(float64(batched.Milliseconds())/float64(b.N), "ms/batched-8")
	b.ReportMetric(float64(sequential.Milliseconds())/float64(b.N), "ms/sequential-8")
	b.ReportMetric(float64(sequential)/float64(batched), "speedup")
}

// BenchmarkRolloutOutsideModel: the share of a batched rollout's wall time
// spent outside the policy (sandbox forks and tool calls over MCP, parsing,
// chat-template rendering, tokenizing observations), timed by a wrapper
// around the policy; the baseline is the time inside the policy in the same
// runs. Also reported: the same rollout with a scripted policy (the golden
// turns, no model), i.e. the loop's own cost per trajectory.
func BenchmarkRolloutOutsideModel(b *testing.B) {
	const n = 8
	m, chain := benchModel(b)
	f := newFactory(b, loadFixture(b, customersDir), sandbox.Options{})
	p := &model.Policy{M: m, CompletionSlots: benchCompletionSlots}
	benchRun(b, p, f, n)
	replay := &rollout.Script{Scripts: [][][]int{{chain[1:], chain[1:], chain[1:]}}}
	var total, inside, scripted time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := &recorder{P: p}
		start := time.Now()
		benchRun(b, rec, f, n)
		total += time.Since(start)
		inside += rec.inside
		start = time.Now()
		benchRun(b, replay, f, n)
		scripted += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/rollout")
	b.ReportMetric(float64(inside.Milliseconds())/float64(b.N), "ms-in-model/rollout")
	b.ReportMetric(100*float64(total-inside)/float64(total), "%outside-model")
	b.ReportMetric(float64(scripted.Microseconds())/1000/float64(b.N*n), "ms-loop+sandbox/trajectory")
}

// BenchmarkRolloutCacheSizing: the batched rollout with the KV cache sized
// as grpo's trainer sized it before 65c5676 (max_prompt_length's bucket
// plus the completion bound: 1,600 slots) against the trainer's
// CompletionSlots now (the actual prompts' bucket, 128 here, plus 896), in
// the same run. speedup = fixed / sized.
func BenchmarkRolloutCacheSizing(b *testing.B) {
	const n = 8
	m, _ := benchModel(b)
	f := newFactory(b, loadFixture(b, customersDir), sandbox.Options{})
	fixed := &model.Policy{M: m, Capacity: benchCapacity}
	sized := &model.Policy{M: m, CompletionSlots: benchCompletionSlots}
	benchRun(b, fixed, f, n)
	benchRun(b, sized, f, n)
	var tf, ts time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		benchRun(b, fixed, f, n)
		tf += time.Since(start)
		start = time.Now()
		benchRun(b, sized, f, n)
		ts += time.Since(start)
	}
	b.ReportMetric(float64(tf.Milliseconds())/float64(b.N), "ms/fixed-capacity")
	b.ReportMetric(float64(ts.Milliseconds())/float64(b.N), "ms/completion-slots")
	b.ReportMetric(float64(tf)/float64(ts), "speedup")
}
