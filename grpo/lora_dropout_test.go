package grpo

import (
	"math"
	"slices"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/model"
)

// TestLoRADropoutInLoss: the GRPO loss graph trains a LoRA adapter through lora_dropout. A fresh adapter (B = 0)
// gives the same loss whatever the masks, but B's gradient reads the dropped-out input, so the gradient norm
// depends on the masks: the same for the same seed and step, another for another seed. With disable_dropout (TRL's
// key) or lora_dropout 0 no mask is drawn and every seed gives the same gradient. The adapter moves and the loss
// stays finite.
func TestLoRADropoutInLoss(t *testing.T) {
	// step runs one optimizer step at learning rate lr on a fresh tiny model with masks seeded by seed; it returns
	// the loss, the gradient norm and lora_B of layer 0's q_proj after the step.
	step := func(dropout float64, disable bool, seed int64, lr float64) (loss, gradNorm float64, b []float32) {
		mc := model.TinyConfig(256, 1, 2)
		mc.NumHiddenLayers = 1
		m, err := model.New(testBackend(), mc, 1)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		cfg.UsePeft, cfg.LoraR, cfg.LoraAlpha, cfg.LoraDropout = true, 4, 8, dropout
		cfg.LoraTargetModules = []string{"q_proj", "v_proj", "down_proj"}
		if err := m.AddLoRA(cfg.LoRA(), 1); err != nil {
			t.Fatal(err)
		}
		cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumGenerations = 4, 1, 4
		cfg.LossType, cfg.MaxCompletionLength, cfg.DisableDropout = LossDAPO, 32, disable
		cfg.VLLMImportanceSamplingCorrection = false
		tr := &Trainer{Config: &cfg, Model: m}
		if err := tr.compile(); err != nil {
			t.Fatal(err)
		}
		const prompt, completion = 32, 32
		gen := &generation{length: prompt + completion, numItems: 4 * completion}
		for i := range 4 {
			traj := &chat.Trajectory{}
			for j := range prompt + completion {
				traj.Tokens = append(traj.Tokens, (i*131+j*17)%256)
				traj.Mask = append(traj.Mask, uint8(min(1, j/prompt)))
			}
			gen.trajs = append(gen.trajs, traj)
			gen.advantages = append(gen.advantages, float64(1-2*(i%2)))
		}
		if err := m.SeedDropout(seed, 0); err != nil {
			t.Fatal(err)
		}
		loss, gradNorm, _, err = tr.optimizerStep(gen, 0, lr)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err = m.Tensor("model.layers.0.self_attn.q_proj.lora_B.weight")
		if err != nil {
			t.Fatal(err)
		}
		return loss, gradNorm, b
	}
	loss, g1, b := step(0.3, false, 1, 1e-3)
	_, again, _ := step(0.3, false, 1, 1e-3)
	loss2, g2, _ := step(0.3, false, 2, 1e-3)
	t.Logf("lora_dropout 0.3: loss %g (seed 2: %g), grad norm %g, seed 2: %g", loss, loss2, g1, g2)
	if math.IsNaN(loss) || math.IsInf(loss, 0) || g1 == 0 || math.IsNaN(g1) {
		t.Fatalf("loss %g, grad norm %g", loss, g1)
	}
	if g1 != again {
		t.Errorf("the same seed gave grad norms %g and %g", g1, again)
	}
	if g1 == g2 {
		t.Errorf("seeds 1 and 2 gave the same grad norm %g: dropout drew no mask", g1)
	}
	if !slices.ContainsFunc(b, func(v float32) bool { return v != 0 }) {
		t.Error("lora_B is still zero after the step")
	}
	_, off1, _ := step(0.3, true, 1, 1e-3)
	_, off2, _ := step(0.3, true, 2, 1e-3)
	_, zero, _ := step(0, false, 1, 1e-3)
	if off1 != off2 || off1 != zero {
		t.Errorf("disable_dropout: grad norms %g and %g for seeds 1 and 2, lora_dropout 0: %g; want all equal", off1, off2, zero)
	}
}
