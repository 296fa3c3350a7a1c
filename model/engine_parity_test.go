package model

import (
	"fmt"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/mcprl/mcprl/internal/enginetest"
)

// testEngine is the engine testBackend opens while TestOnEngines runs ("" outside it).
var testEngine Engine

// engineBackend opens engine for a test (enginetest.Unavailable when it cannot), finalized when the test ends.
func engineBackend(t testing.TB, engine Engine) backends.Backend {
	t.Helper()
	eb, err := OpenEngine(engine)
	if err != nil {
		enginetest.Unavailable(t, string(engine), err)
	}
	t.Cleanup(eb.Backend.Finalize)
	return eb.Backend
}

// onEngines is the subset of this package's tests that TestOnEngines runs again on each engine besides simplego
// (XLA compiles every graph shape, seconds each, so the whole suite is minutes there; GOMLX_BACKEND=xla runs all
// of it): the forward pass against transformers' float64 logits, the chunked log-probs and their gradients (LoRA
// and trainable tokens included), KV-cache decoding against the full forward pass (window growth, appended
// tokens, sampled log-probs), LoRA against peft, trainable tokens through decoding, and save/load. The GRPO and
// SFT steps, checkpoints and --resume on each engine are in grpo, sft and cmd/mcprl (engine_test.go).
var onEngines = []struct {
	name string
	test func(*testing.T)
}{
	{"GoldenLogits", TestGoldenLogits},
	{"ChunkedLogProbs", chunkedLogProbsOnEngine},
	{"RecomputeExact", TestRecomputeExact},
	{"RecomputeExactDropout", TestRecomputeExactDropout},
	{"GreedyCacheMatchesNoCache", TestGreedyCacheMatchesNoCache},
	{"CacheWindowGrowth", TestCacheWindowGrowth},
	{"SamplingLogProbsAndDeterminism", TestSamplingLogProbsAndDeterminism},
	{"LoRAMatchesPeft", TestLoRAMatchesPeft},
	{"TrainableTokensGenerate", TestTrainableTokensGenerate},
	{"SaveLoadSave", TestSaveLoadSave},
}

// TestOnEngines runs onEngines on every engine of enginetest.Engines but simplego (the other tests run there).
// Their bounds hold on any engine: they come from the float64 references and from each comparison's own
// rounding, not from one engine's output.
func TestOnEngines(t *testing.T) {
	for _, e := range enginetest.Others() {
		t.Run(e, func(t *testing.T) {
			engineBackend(t, Engine(e)) // skip or fail at once when it cannot open
			testEngine = Engine(e)
			defer func() { testEngine = "" }()
			for _, c := range onEngines {
				t.Run(c.name, c.test)
			}
		})
	}
}

// chunkedLogProbsOnEngine is TestChunkedLogProbs cut to two of its cases (its full grid compiles some forty graphs,
// minutes on XLA): chunks of 5 rows against the full logits from position 0, left-padded, for an untied model at
// temperature 1 (the projection's own chunked gradient) and a tied one at 0.7 with LoRA, with its bounds.
func chunkedLogProbsOnEngine(t *testing.T) {
	backend := testBackend(t)
	for _, tc := range []struct {
		tied bool
		temp float64
		lora bool
	}{{false, 1, false}, {true, 0.7, true}} {
		t.Run(fmt.Sprintf("tied=%v,temperature=%v,lora=%v", tc.tied, tc.temp, tc.lora), func(t *testing.T) {
			m := gradModel(t, backend, tc.tied)
			if tc.lora {
				if err := m.AddLoRA(LoRAConfig{R: 4, Alpha: 8, TargetModules: []string{"q_proj", "v_proj", "down_proj"}}, 3); err != nil {
					t.Fatal(err)
				}
			}
			tokens, mask := gradBatch(t, true)
			wantLP, wantGrads := logProbsAndGradients(t, m, tokens, mask, tc.temp, 0, 0)
			gotLP, gotGrads := logProbsAndGradients(t, m, tokens, mask, tc.temp, 5, 0)
			maxLP, maxG := chunkedWithin(t, &m.Config, tokens.Shape().Size(), gotLP, wantLP, gotGrads, wantGrads, "left-padded")
			t.Logf("max |diff| log-probs %.2g, gradients %.2g", maxLP, maxG)
		})
	}
}
