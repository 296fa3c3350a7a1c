package grpo_test

// Failing test for the lead (grpo/trainer.go, Trainer.rollout): a config
// without max_tool_calling_iterations (nil) is passed to the rollout as 0,
// so no tool call is ever executed. TRL: None means no limit (generation
// stops at a turn without tool calls or at max_completion_length).
// Copy into grpo/ and run: go test ./grpo -run TestTrainerRunsToolsWithoutIterationLimit

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

type stopAfterGeneration struct{}

// toolCallingModel is a tiny Qwen2 that always calls query_database.
func toolCallingModel(t *testing.T) (*model.Model, *tokenizer.Tokenizer, *tokenizer.Template) {
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) int32 { i, _ := tok.TokenID(s); return int32(i) }
	nl := int32(tok.Encode("\n")[0])
	// A tiny Qwen2 whose untied lm_head makes it greedily write
	// <tool_call>{"name": "query_database"\n}</tool_call> after "\n" (the
	// generation prompt's end): ids spelled so that no id repeats.
	chain := []int32{nl, id("<tool_call>")}
	for _, s := range []string{"{", "\"", "name", "\":", " \"", "query", "_d", "at", "ab", "ase"} {
		chain = append(chain, int32(tok.Encode(s)[0]))
	}
	chain = append(chain, int32(tok.Encode("\"\n")[0]), int32(tok.Encode("}")[0]), id("</tool_call>"))
	backend, _ := model.NewBackend("")
	cfg := model.TinyConfig(tokenizer.SmallVocabSize, -1, int(id("<|im_end|>")))
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 64, 128, 1, 4, 2
	cfg.TieWordEmbeddings = false
	m, err := model.New(backend, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.HiddenSize
	e := tensors.MustCopyFlatData[float32](m.Ctx.GetVariableByScopeAndName("/model/embed_tokens", "weight").MustValue())
	head := m.Ctx.GetVariableByScopeAndName("/lm_head", "weight")
	w := tensors.MustCopyFlatData[float32](head.MustValue())
	for k := 0; k+1 < len(chain); k++ {
		a, b := int(chain[k]), int(chain[k+1])
		n := 0.0
		for j := 0; j < d; j++ {
			n += float64(e[a*d+j] * e[a*d+j])
		}
		for j := 0; j < d; j++ {
			w[b*d+j] += float32(40/math.Sqrt(n)) * e[a*d+j]
		}
	}
	head.SetValue(tensors.FromFlatDataAndDimensions(w, cfg.VocabSize, d))
	return m, tok, tpl
}

// firstGeneration runs a one-task trainer with the tool-calling model
// against a customers sandbox made with opts, until its first generation.
func firstGeneration(t *testing.T, opts sandbox.Options, iters *int) (trajs []*chat.Trajectory, rewards []float64) {
	m, tok, tpl := toolCallingModel(t)
	fx, err := task.LoadFixture("../examples/fixtures/customers")
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandbox.NewFactory(context.Background(), fx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gc := grpo.Default()
	gc.OutputDir, gc.MaxSteps, gc.NumGenerations, gc.PerDeviceTrainBatchSize = t.TempDir(), 1, 2, 2
	gc.MaxCompletionLength, gc.MaxPromptLength = 96, 256
	gc.MaxToolCallingIterations = iters
	seed, err := reward.NewRegistry().New("compute_mcp_reward")
	if err != nil {
		t.Fatal(err)
	}
	tr := &grpo.Trainer{Config: &gc, Model: m, Tokenizer: tok, Template: tpl,
		Tasks:     []task.Task{{ID: "t", Task: "How many inactive customers?", Fixture: "customers"}},
		Sandboxes: map[string]*sandbox.Factory{"customers": f}, Rewards: []reward.Func{seed}, Weights: []float64{1},
		OnGeneration: func(_ int, got []*chat.Trajectory, r []float64) {
			trajs, rewards = got, r
			panic(stopAfterGeneration{}) // the optimizer step is not what this test is about
		}}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stopAfterGeneration); !ok {
					panic(r)
				}
			}
		}()
		tr.Train(context.Background(), false)
	}()
	if len(trajs) == 0 {
		t.Fatal("no generation")
	}
	return trajs, rewards
}

func TestTrainerRunsToolsWithoutIterationLimit(t *testing.T) {
	got, _ := firstGeneration(t, sandbox.Options{}, nil) // max_tool_calling_iterations not set in the YAML
	for i, traj := range got {
		calls := traj.Calls()
		if len(calls) == 0 {
			t.Fatalf("trajectory %d made no call: %q", i, traj.Completion())
		}
		if calls[0].Text == "" {
			t.Errorf("trajectory %d: its first tool call was never executed (max_tool_calling_iterations unset became 0)", i)
		}
	}
}

// A trajectory that an infrastructure failure ended (here: the tool server
// does not answer within the call timeout) is left out of training, not
// scored: its reward is NaN and none of its tokens is trained on.
func TestTrainerLeavesOutFailedTrajectories(t *testing.T) {
	iters := 2
	got, rewards := firstGeneration(t, sandbox.Options{CallTimeout: time.Nanosecond}, &iters)
	for i, traj := range got {
		if traj.Error == "" {
			t.Fatalf("trajectory %d ended without the call timeout: %q", i, traj.Completion())
		}
		if !math.IsNaN(rewards[i]) {
			t.Errorf("trajectory %d (%s) scored %v, want NaN (left out)", i, traj.Error, rewards[i])
		}
		for j, m := range traj.Mask {
			if m != 0 {
				t.Errorf("trajectory %d: token %d is trained on", i, j)
				break
			}
		}
	}
}
