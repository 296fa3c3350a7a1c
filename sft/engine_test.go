package sft_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/internal/enginetest"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/sft"
)

// TestSFTOnEngines: on each engine (enginetest.Engines), three SFT steps of one tiny random Qwen2 on the same
// golden trajectories, replayed against the live sandbox: the loss falls, checkpoint-2 and final/ load back. The
// first step's loss and gradient norm are the same computation on the same weights and data on every engine,
// so they agree across engines up to float32 rounding: each token's log-prob by 4·eps32·(√hidden + √vocab +
// √positions)·(1 + |log-prob|) (the chunked log-probs' bound for another reduction order, widened by the
// attention's sums over positions), so the mean loss by that bound at 1 + loss, and the gradient norm by the same
// relative amount.
func TestSFTOnEngines(t *testing.T) {
	ctx := context.Background()
	_, examples := quickExamples(t)
	mc := tinyConfig(t)
	positions := 0
	for _, ex := range examples {
		positions = max(positions, len(ex.Tokens))
	}
	type first struct{ loss, gradNorm float64 }
	firsts := map[string]first{}
	enginetest.Run(t, func(t *testing.T, engine string) {
		eb, err := model.OpenEngine(model.Engine(engine))
		if err != nil {
			enginetest.Unavailable(t, engine, err)
		}
		t.Cleanup(eb.Backend.Finalize)
		m, err := model.New(eb.Backend, mc, 3)
		if err != nil {
			t.Fatal(err)
		}
		cfg := sft.Default()
		cfg.OutputDir = t.TempDir()
		cfg.MaxSteps, cfg.SaveSteps, cfg.LoggingSteps = 3, 2, 1
		cfg.PerDeviceTrainBatchSize = 4
		cfg.LearningRate, cfg.LRSchedulerType = 1e-2, "constant"
		tr := &sft.Trainer{Config: &cfg, Model: m, TokenizerDir: "../tokenizer/small/qwen2.5-2048", Examples: examples}
		if err := tr.Train(ctx); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(cfg.OutputDir, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var recs []first
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var rec struct {
				Loss     float64 `json:"loss"`
				GradNorm float64 `json:"grad_norm"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, first{rec.Loss, rec.GradNorm})
		}
		if len(recs) != 3 || !(recs[2].loss < recs[0].loss) || recs[0].gradNorm == 0 {
			t.Fatalf("metrics %+v: want 3 steps, the loss falling", recs)
		}
		for _, dir := range []string{"checkpoint-2", "final"} {
			if _, err := model.Load(eb.Backend, filepath.Join(cfg.OutputDir, dir)); err != nil {
				t.Errorf("%s: %v", dir, err)
			}
		}
		firsts[engine] = recs[0]
		t.Logf("%s: losses %+v", engine, recs)
	})
	ref, ok := firsts["simplego"]
	if !ok {
		return
	}
	rel := 4 * 0x1p-23 * (math.Sqrt(float64(mc.HiddenSize)) + math.Sqrt(float64(mc.VocabSize)) + math.Sqrt(float64(positions)))
	for e, got := range firsts {
		if e == "simplego" {
			continue
		}
		dl, dg := math.Abs(got.loss-ref.loss), math.Abs(got.gradNorm-ref.gradNorm)
		t.Logf("%s against simplego: step 1 loss %v (|diff| %.3g, bound %.3g), grad_norm %v (|diff| %.3g, bound %.3g)",
			e, got.loss, dl, rel*(1+ref.loss), got.gradNorm, dg, rel*ref.gradNorm)
		if dl > rel*(1+ref.loss) || dg > rel*ref.gradNorm {
			t.Errorf("%s: step 1 loss %v, grad_norm %v; simplego %v, %v", e, got.loss, got.gradNorm, ref.loss, ref.gradNorm)
		}
	}
}
