package grpo

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/tokenizer"
)

// Branch micro-batches are spread over a cycle's optimizer steps so that
// each is trained as often as the root groups' micro-batches.
func TestStepMicroBatches(t *testing.T) {
	gen := &generation{baseMicroBatches: 4, trajs: make([]*chat.Trajectory, 2*7)} // bs 2: 4 root, 3 branch micro-batches
	// ga 2: one pass over the roots is 2 steps; with num_iterations 2 the cycle is 4 steps.
	want := [][]int{{0, 1, 4, 6}, {2, 3, 5}, {0, 1, 4, 6}, {2, 3, 5}}
	for offset, w := range want {
		if got := gen.stepMicroBatches(offset, 2, 2); !slices.Equal(got, w) {
			t.Errorf("step %d: micro-batches %v, want %v", offset, got, w)
		}
	}
	// Without branches a step trains its ga micro-batches, as before.
	gen.trajs = gen.trajs[:8]
	if got := gen.stepMicroBatches(1, 2, 2); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("no branches: %v", got)
	}
}

// With recovery_forced_opener_loss, a forced continuation's forced tokens
// (the tool-call opener; with recovery_forced_look a whole look, then the
// opener after its observation) enter the loss: mask 1 on exactly those
// tokens, and as old log-probs the policy's own there, computed on the
// trajectory through its last forced token; a free continuation and every
// other token are left as they were.
func TestCreditOpeners(t *testing.T) {
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	eos, _ := tok.TokenID("<|im_end|>")
	mcfg := model.TinyConfig(tokenizer.SmallVocabSize, -1, eos)
	m, err := model.New(backend, mcfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	cfg.PerDeviceTrainBatchSize, cfg.Temperature = 2, 1
	tr := &Trainer{Config: &cfg, Model: m, Tokenizer: tok}
	if err := tr.compile(); err != nil {
		t.Fatal(err)
	}
	// branch is a continuation of prefix: segments of text, each forced
	// (not the policy's samples, Mask 0), an observation (Mask 0) or its
	// own samples (Mask 1, old log-prob -0.5).
	type segment struct {
		text string
		kind byte // 'f' forced, 'o' observation, 's' sampled
	}
	branch := func(prefix string, segs ...segment) *rollout.Result {
		tj := &chat.Trajectory{Tokens: tok.Encode(prefix)}
		tj.Mask, tj.OldLogProbs = make([]uint8, len(tj.Tokens)), make([]float32, len(tj.Tokens))
		res := &rollout.Result{Trajectory: tj, BranchAt: len(tj.Tokens)}
		for _, sg := range segs {
			ids := tok.Encode(sg.text)
			if sg.kind == 'f' {
				res.Forced = true
				res.ForcedSpans = append(res.ForcedSpans, [2]int{len(tj.Tokens), len(tj.Tokens) + len(ids)})
			}
			for _, id := range ids {
				tj.Tokens = append(tj.Tokens, id)
				tj.Mask = append(tj.Mask, map[bool]uint8{true: 1}[sg.kind == 's'])
				tj.OldLogProbs = append(tj.OldLogProbs, map[bool]float32{true: -0.5}[sg.kind == 's'])
			}
		}
		return res
	}
	prefix := "<|im_start|>user\nHow many inactive customers?<|im_end|>\n<|im_start|>assistant\n" +
		"<tool_call>\n{\"name\": \"query_database\"}\n</tool_call><|im_end|>\n<|im_start|>user\n" +
		"<tool_response>\nerror: no such table: clients\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
	look := "<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\":\"SELECT name FROM sqlite_master\"}}\n</tool_call>"
	branches := []*rollout.Result{
		branch(prefix, segment{rollout.ForcedOpener, 'f'}, segment{`{"name": "query_database", "arguments": {"sql": "SELECT 1"}}`, 's'}),
		branch(prefix, segment{"There are 3.", 's'}),
		branch(prefix+"Let me look.", segment{rollout.ForcedOpener, 'f'}, segment{`{"name": "list_tables"}`, 's'}),
		branch(prefix, segment{look, 'f'},
			segment{"<|im_end|>\n<|im_start|>user\n<tool_response>\nclients\n</tool_response><|im_end|>\n<|im_start|>assistant\n", 'o'},
			segment{rollout.ForcedOpener, 'f'}, segment{`{"name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM clients"}}`, 's'}),
	}
	before := make([]*chat.Trajectory, len(branches))
	for i, b := range branches {
		c := *b.Trajectory
		c.Mask, c.OldLogProbs = slices.Clone(b.Mask), slices.Clone(b.OldLogProbs)
		before[i] = &c
	}
	prob, err := tr.creditOpeners(branches)
	if err != nil {
		t.Fatal(err)
	}
	want := 0.0
	for i, b := range branches {
		row := make([]int32, len(b.Tokens))
		for k, id := range b.Tokens {
			row[k] = int32(id)
		}
		ones := make([]int32, len(row))
		for k := range ones {
			ones[k] = 1
		}
		_, lp, err := m.Forward([][]int32{row}, [][]int32{ones})
		if err != nil {
			t.Fatal(err)
		}
		ref := tensors.MustCopyFlatData[float32](lp)
		sum := 0.0
		for k := range b.Tokens {
			inOpener := false
			for _, sp := range b.ForcedSpans {
				inOpener = inOpener || (k >= sp[0] && k < sp[1])
			}
			if !inOpener {
				if b.Mask[k] != before[i].Mask[k] || b.OldLogProbs[k] != before[i].OldLogProbs[k] {
					t.Errorf("branch %d token %d: mask %d, old log-prob %v changed (was %d, %v)", i, k, b.Mask[k], b.OldLogProbs[k], before[i].Mask[k], before[i].OldLogProbs[k])
				}
				continue
			}
			// Both are float32 passes of one model over different shapes: their difference is rounding, which a
			// log-softmax over the vocabulary after dot products of hidden size bounds by (V + H) ulps of the value.
			tol := float64(mcfg.VocabSize+mcfg.HiddenSize) * 0x1p-23 * (1 + math.Abs(float64(ref[k])))
			if b.Mask[k] != 1 || math.Abs(float64(b.OldLogProbs[k]-ref[k])) > tol || ref[k] >= 0 {
				t.Errorf("branch %d opener token %d: mask %d, old log-prob %v; want 1 and the policy's %v", i, k, b.Mask[k], b.OldLogProbs[k], ref[k])
			}
			sum += float64(ref[k])
		}
		if b.Forced {
			want += math.Exp(sum) / 3
		}
	}
	if math.Abs(prob-want) > 1e-3*want || prob <= 0 || prob > 1 {
		t.Errorf("mean opener probability %v, want %v", prob, want)
	}
}
