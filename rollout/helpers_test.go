package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
)

const customersDir = "../examples/fixtures/customers"

// systemPrompt is the seed task's system prompt (examples/customers/tasks.jsonl).
const systemPrompt = "You are a Model Context Protocol reasoning agent. You have access to the following MCP tools:\n- name: query_database\n  inputSchema: {\"sql\": {\"type\": \"string\"}}\n- name: run_linter\n  inputSchema: {\"path\": {\"type\": \"string\"}}"

func seedTask() *task.Task {
	return &task.Task{
		ID: "seed", SystemPrompt: systemPrompt, Fixture: "customers",
		Task: "Find all inactive customer records in postgres and verify schema integrity.",
	}
}

var (
	tokOnce sync.Once
	tokVal  *tokenizer.Tokenizer
	tplVal  *tokenizer.Template
	tokErr  error
)

// smallTokenizer is the real reduced Qwen2.5 tokenizer and its chat template.
func smallTokenizer(t testing.TB) (*tokenizer.Tokenizer, *tokenizer.Template) {
	t.Helper()
	tokOnce.Do(func() {
		if tokVal, tokErr = tokenizer.Small(); tokErr == nil {
			tplVal, tokErr = tokVal.Template()
		}
	})
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tokVal, tplVal
}

func tokenID(t testing.TB, tok *tokenizer.Tokenizer, s string) int {
	t.Helper()
	id, ok := tok.TokenID(s)
	if !ok {
		ids := tok.Encode(s)
		if len(ids) != 1 {
			t.Fatalf("%q is not one token: %v", s, ids)
		}
		id = ids[0]
	}
	return id
}

func encode(tok *tokenizer.Tokenizer, s string) []int { return tok.Encode(s) }

func decode(tok *tokenizer.Tokenizer, ids []int) string { return tok.Decode(ids) }

func loadFixture(t testing.TB, dir string) *task.Fixture {
	t.Helper()
	fx, err := task.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// customersWith copies the customers fixture with sandboxYAML as its sandbox.yaml.
func customersWith(t testing.TB, sandboxYAML string) *task.Fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "customers")
	if err := os.CopyFS(dir, os.DirFS(customersDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sandbox.yaml"), []byte(sandboxYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return loadFixture(t, dir)
}

func newFactory(t testing.TB, fx *task.Fixture, opts sandbox.Options) *sandbox.Factory {
	t.Helper()
	f, err := sandbox.NewFactory(context.Background(), fx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("Factory.Close: %v", err)
		}
	})
	return f
}

// tinyModel is a real Qwen2 of random weights over the small tokenizer's
// vocabulary, small enough for unit tests.
func tinyModel(t testing.TB, seed uint64, tied bool) *model.Model {
	t.Helper()
	tok, _ := smallTokenizer(t)
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.TinyConfig(tokenizer.SmallVocabSize, -1, tokenID(t, tok, "<|im_end|>"))
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 64, 128, 1
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 4, 2
	cfg.TieWordEmbeddings = tied
	m, err := model.New(backend, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// chainModel is a tiny model whose untied lm_head is rewritten so that,
// greedily, it follows a fixed token chain: after token chain[k] its most
// likely next token is chain[k+1]. A random Qwen2's last hidden state is
// close to its last token's embedding, so row chain[k+1] of lm_head is set
// to a large multiple of chain[k]'s embedding. The model is a real Qwen2
// with a real KV cache; only its weights are chosen.
func chainModel(t testing.TB, seed uint64, chain []int) *model.Model {
	t.Helper()
	return chainWeights(t, tinyModel(t, seed, false), chain)
}

// chainWeights rewrites m's untied lm_head so that it greedily follows chain.
func chainWeights(t testing.TB, m *model.Model, chain []int) *model.Model {
	t.Helper()
	d, v := m.Config.HiddenSize, m.Config.VocabSize
	emb := m.Ctx.GetVariableByScopeAndName("/model/embed_tokens", "weight")
	head := m.Ctx.GetVariableByScopeAndName("/lm_head", "weight")
	if emb == nil || head == nil {
		t.Fatal("model has no embed_tokens or lm_head variable")
	}
	e := tensors.MustCopyFlatData[float32](emb.MustValue())
	w := tensors.MustCopyFlatData[float32](head.MustValue())
	for k := 0; k+1 < len(chain); k++ {
		a, b := chain[k], chain[k+1]
		norm := 0.0
		for j := 0; j < d; j++ {
			norm += float64(e[a*d+j]) * float64(e[a*d+j])
		}
		scale := float32(40 / math.Sqrt(norm))
		for j := 0; j < d; j++ {
			w[b*d+j] += scale * e[a*d+j]
		}
	}
	if err := head.SetValue(tensors.FromFlatDataAndDimensions(w, v, d)); err != nil {
		t.Fatal(err)
	}
	return m
}

// recorder wraps a policy and records, per sequence, every prompt, sample
// and appended observation, in order, with the time spent inside the policy.
type recorder struct {
	P policy.Policy

	mu      sync.Mutex
	batches []*recBatch
	inside  time.Duration
}

type event struct {
	sampled  bool
	ids      []int
	logProbs []float32
	stopped  bool
}

type recBatch struct {
	r       *recorder
	b       policy.Batch
	opts    policy.SampleOptions
	prompts [][]int
	events  [][]event
	closed  bool
}

func (r *recorder) NewBatch(ctx context.Context, prompts [][]int, opts policy.SampleOptions) (policy.Batch, error) {
	start := time.Now()
	b, err := r.P.NewBatch(ctx, prompts, opts)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inside += time.Since(start)
	if err != nil {
		return nil, err
	}
	rb := &recBatch{r: r, b: b, opts: opts, events: make([][]event, len(prompts))}
	for _, p := range prompts {
		rb.prompts = append(rb.prompts, slices.Clone(p))
	}
	r.batches = append(r.batches, rb)
	return rb, nil
}

func (b *recBatch) Generate(ctx context.Context, maxNew []int) ([]policy.Sample, error) {
	start := time.Now()
	out, err := b.b.Generate(ctx, maxNew)
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	b.r.inside += time.Since(start)
	if err != nil {
		return out, err
	}
	if len(out) != len(maxNew) {
		return nil, fmt.Errorf("recorder: %d samples for %d budgets", len(out), len(maxNew))
	}
	for i, s := range out {
		if maxNew[i] > 0 {
			b.events[i] = append(b.events[i], event{sampled: true, ids: slices.Clone(s.IDs),
				logProbs: append([]float32(nil), s.LogProbs...), stopped: s.Stopped})
		} else if len(s.IDs) > 0 {
			return nil, fmt.Errorf("recorder: sequence %d sampled %d tokens with no budget", i, len(s.IDs))
		}
	}
	return out, nil
}

func (b *recBatch) Append(i int, tokens []int) error {
	start := time.Now()
	err := b.b.Append(i, tokens)
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	b.r.inside += time.Since(start)
	if err == nil {
		b.events[i] = append(b.events[i], event{ids: slices.Clone(tokens)})
	}
	return err
}

func (b *recBatch) Close() error {
	b.r.mu.Lock()
	b.closed = true
	b.r.mu.Unlock()
	return b.b.Close()
}

// checkTokenInTokenOut checks trajectory i against what the policy
// sampled and what was appended to sequence i of batch b: the ids are the
// prompt, then every sample and observation in order; the mask is 1 exactly
// on sampled ids; the old log-probs are the sampled ones.
func checkTokenInTokenOut(t *testing.T, b *recBatch, i int, tr *chat.Trajectory) {
	t.Helper()
	var ids []int
	var mask []uint8
	var lps []float32
	ids = append(ids, b.prompts[i]...)
	mask = append(mask, make([]uint8, len(b.prompts[i]))...)
	lps = append(lps, make([]float32, len(b.prompts[i]))...)
	for _, e := range b.events[i] {
		ids = append(ids, e.ids...)
		for k := range e.ids {
			if e.sampled {
				mask = append(mask, 1)
				lps = append(lps, e.logProbs[k])
			} else {
				mask = append(mask, 0)
				lps = append(lps, 0)
			}
		}
	}
	if tr.PromptLen != len(b.prompts[i]) {
		t.Errorf("trajectory %d: PromptLen %d, prompt had %d ids", i, tr.PromptLen, len(b.prompts[i]))
	}
	if len(tr.Tokens) != len(tr.Mask) || len(tr.Tokens) != len(tr.OldLogProbs) {
		t.Fatalf("trajectory %d: %d tokens, %d mask, %d old log-probs", i, len(tr.Tokens), len(tr.Mask), len(tr.OldLogProbs))
	}
	// An observation appended after the trajectory ended (none should be)
	// would make ids longer than Tokens.
	if !equal(tr.Tokens, ids) {
		t.Errorf("trajectory %d: tokens differ from prompt+samples+observations:\n got %v\nwant %v", i, tr.Tokens, ids)
	}
	if !equal(tr.Mask, mask) {
		t.Errorf("trajectory %d: mask\n got %v\nwant %v", i, tr.Mask, mask)
	}
	if !equal(tr.OldLogProbs, lps) {
		t.Errorf("trajectory %d: old log-probs differ from the sampled ones", i)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// distinctIDs spells text with vocabulary tokens that are all different
// from each other and from avoid (a path through the vocabulary that a
// first-order chain can follow), preferring long tokens.
func distinctIDs(t testing.TB, tok *tokenizer.Tokenizer, text string, avoid ...int) []int {
	t.Helper()
	pieces := make([]string, tokenizer.SmallVocabSize)
	for id := range pieces {
		pieces[id] = tok.Decode([]int{id})
	}
	used := map[int]bool{}
	for _, a := range avoid {
		used[a] = true
	}
	var path []int
	var dfs func(pos int) bool
	dfs = func(pos int) bool {
		if pos == len(text) {
			return true
		}
		var cands []int
		for id, p := range pieces {
			if p != "" && !used[id] && len(p) <= len(text)-pos && text[pos:pos+len(p)] == p {
				cands = append(cands, id)
			}
		}
		// longest first
		for i := 1; i < len(cands); i++ {
			for j := i; j > 0 && len(pieces[cands[j]]) > len(pieces[cands[j-1]]); j-- {
				cands[j], cands[j-1] = cands[j-1], cands[j]
			}
		}
		for _, id := range cands {
			used[id] = true
			path = append(path, id)
			if dfs(pos + len(pieces[id])) {
				return true
			}
			path = path[:len(path)-1]
			used[id] = false
		}
		return false
	}
	if !dfs(0) {
		t.Fatalf("no spelling of %q with distinct tokens", text)
	}
	return path
}

// sandboxReward is a reward that calls f with the trajectory's sandbox,
// one call at a time (Run scores trajectories concurrently), and scores 0.
type sandboxReward func(context.Context, *sandbox.Sandbox) error

var sandboxRewardMu sync.Mutex

func (sandboxReward) Name() string { return "sandbox" }

func (f sandboxReward) Score(ctx context.Context, in *reward.Input) (reward.Score, error) {
	sandboxRewardMu.Lock()
	defer sandboxRewardMu.Unlock()
	return reward.Score{}, f(ctx, in.Sandbox.(*sandbox.Sandbox))
}

func toolcallSchemas(f *sandbox.Factory) []json.RawMessage {
	return toolcall.FunctionSchemas(f.Tools())
}

// chainPolicyModel is a chainModel that greedily writes, after the
// generation prompt's "\n", the call <tool_call>{"name": "query_database"\n}</tool_call>.
func chainPolicyModel(t testing.TB) (*model.Model, []int) {
	t.Helper()
	tok, _ := smallTokenizer(t)
	nl := tokenID(t, tok, "\n")
	stop := tokenID(t, tok, "</tool_call>")
	body := distinctIDs(t, tok, "<tool_call>{\"name\": \"query_database\"\n}", nl, stop)
	chain := append(append([]int{nl}, body...), stop)
	return chainModel(t, 1, chain), chain
}

// checkOldLogProbs recomputes every trajectory's per-token log-probs with
// the model's training-graph forward (no cache) and compares them with the
// old log-probs the rollout kept on sampled tokens.
func checkOldLogProbs(t *testing.T, m *model.Model, trajs []*rollout.Result) {
	t.Helper()
	exec, err := mlctx.NewExec(m.Backend, m.Ctx, func(ctx *mlctx.Context, tokens, attn *graph.Node) *graph.Node {
		return m.TokenLogProbsAt(ctx, tokens, attn, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	seqs := make([][]int, len(trajs))
	for i, tr := range trajs {
		longest = max(longest, len(tr.Tokens))
		seqs[i] = tr.Tokens
	}
	length := model.Bucket(longest)
	tokens, attn, err := model.PadBatch(seqs, length, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec.Exec(tokens, attn)
	if err != nil {
		t.Fatal(err)
	}
	lp := tensors.MustCopyFlatData[float32](res[0])
	worst := 0.0
	for i, tr := range trajs {
		for k, mk := range tr.Mask {
			if mk == 1 {
				worst = max(worst, math.Abs(float64(lp[i*length+k]-tr.OldLogProbs[k])))
			}
		}
	}
	if worst > 2e-3 {
		t.Errorf("old log-probs differ from the model's by up to %g", worst)
	}
}
