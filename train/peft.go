package train

import (
	"fmt"
	"io"
	"strings"

	"github.com/mcprl/mcprl/model"
)

// PeftArguments are TRL ModelConfig's LoRA keys, which GRPO and SFT configs share: with use_peft the policy
// trains a peft LoRA adapter on frozen base weights (model/lora.go). lora_dropout, in [0, 1), is peft's dropout
// on the adapter's input, acting in the loss's forward only (model/lora.go says why).
type PeftArguments struct {
	UsePeft           bool     `yaml:"use_peft"`
	LoraR             int      `yaml:"lora_r"`
	LoraAlpha         float64  `yaml:"lora_alpha"`
	LoraDropout       float64  `yaml:"lora_dropout"`
	LoraTargetModules []string `yaml:"lora_target_modules"`
}

// DefaultPeftArguments returns TRL ModelConfig's defaults (lora_r 16, lora_alpha 32, lora_dropout 0.05) and
// peft's default target modules for Llama and Qwen2 (q_proj, v_proj).
func DefaultPeftArguments() PeftArguments {
	return PeftArguments{LoraR: 16, LoraAlpha: 32, LoraDropout: 0.05, LoraTargetModules: []string{"q_proj", "v_proj"}}
}

// LoRA is the adapter configuration of p.
func (p *PeftArguments) LoRA() model.LoRAConfig {
	return model.LoRAConfig{R: p.LoraR, Alpha: p.LoraAlpha, Dropout: p.LoraDropout, TargetModules: p.LoraTargetModules}
}

// Attach gives m, loaded from modelDir, the adapter it trains: the one m
// brings (a checkpoint or model directory with an adapter/ subdirectory),
// else a fresh LoRA adapter seeded with seed when use_peft is set; without
// either the whole model trains. It says to log which adapter trains.
func (p *PeftArguments) Attach(m *model.Model, modelDir string, seed int64, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	if lc := m.LoRA(); lc != nil {
		fmt.Fprintf(log, "LoRA adapter of %s/%s: r %d, alpha %g, dropout %g, %v (base weights frozen)\n", modelDir, model.AdapterDir, lc.R, lc.Alpha, lc.Dropout, lc.TargetModules)
		return nil
	}
	if !p.UsePeft {
		return nil
	}
	if err := m.AddLoRA(p.LoRA(), uint64(seed)); err != nil {
		return err
	}
	lc := m.LoRA()
	fmt.Fprintf(log, "LoRA: r %d, alpha %g, dropout %g, %v (base weights frozen)\n", lc.R, lc.Alpha, lc.Dropout, lc.TargetModules)
	return nil
}

// Check records the problems of p's values when use_peft is set.
func (p *PeftArguments) Check(c *Checker) {
	if !p.UsePeft {
		return
	}
	lc := p.LoRA()
	if err := lc.Validate(); err != nil {
		key := "lora_r"
		switch {
		case strings.Contains(err.Error(), "alpha"):
			key = "lora_alpha"
		case strings.Contains(err.Error(), "dropout"):
			key = "lora_dropout"
		case strings.Contains(err.Error(), "target"):
			key = "lora_target_modules"
		}
		c.Add(key, err)
	}
}
