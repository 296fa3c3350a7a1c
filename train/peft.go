package train

import (
	"fmt"
	"io"
	"strings"

	"github.com/mcprl/mcprl/model"
)

// PeftArguments are TRL ModelConfig's LoRA keys, which GRPO and SFT configs share: with use_peft the policy
// trains a peft LoRA adapter on frozen base weights (model/lora.go). lora_dropout must be 0 (TRL's default is
// 0.05; dropout is not implemented).
type PeftArguments struct {
	UsePeft           bool     `yaml:"use_peft"`
	LoraR             int      `yaml:"lora_r"`
	LoraAlpha         float64  `yaml:"lora_alpha"`
	LoraDropout       float64  `yaml:"lora_dropout"`
	LoraTargetModules []string `yaml:"lora_target_modules"`
}

// DefaultPeftArguments returns TRL's and peft's defaults (dropout 0, see PeftArguments).
func DefaultPeftArguments() PeftArguments {
	return PeftArguments{LoraR: 16, LoraAlpha: 32, LoraTargetModules: []string{"q_proj", "v_proj"}} // peft's default for Llama and Qwen2
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
		fmt.Fprintf(log, "LoRA adapter of %s/%s: r %d, alpha %g, %v (base weights frozen)\n", modelDir, model.AdapterDir, lc.R, lc.Alpha, lc.TargetModules)
		return nil
	}
	if !p.UsePeft {
		return nil
	}
	if err := m.AddLoRA(p.LoRA(), uint64(seed)); err != nil {
		return err
	}
	lc := m.LoRA()
	fmt.Fprintf(log, "LoRA: r %d, alpha %g, %v (base weights frozen)\n", lc.R, lc.Alpha, lc.TargetModules)
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
