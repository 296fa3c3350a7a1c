package train

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/tokenizer"
)

// PeftArguments are TRL ModelConfig's LoRA keys, which GRPO and SFT configs share: with use_peft the policy
// trains a peft LoRA adapter on frozen base weights (model/lora.go). lora_dropout, in [0, 1), is peft's dropout
// on the adapter's input, acting in the loss's forward only (model/lora.go says why). trainable_token_indices
// (peft's LoraConfig key, a list of token ids) also trains those ids' embedding rows (and, with tied embeddings,
// their lm_head rows), as peft's trainable tokens (model/tokens.go); every other row stays frozen.
type PeftArguments struct {
	UsePeft           bool     `yaml:"use_peft"`
	LoraR             int      `yaml:"lora_r"`
	LoraAlpha         float64  `yaml:"lora_alpha"`
	LoraDropout       float64  `yaml:"lora_dropout"`
	LoraTargetModules []string `yaml:"lora_target_modules"`
	TrainableTokens   []int    `yaml:"trainable_token_indices"`
}

// DefaultPeftArguments returns TRL ModelConfig's defaults (lora_r 16, lora_alpha 32, lora_dropout 0.05) and
// peft's default target modules for Llama and Qwen2 (q_proj, v_proj).
func DefaultPeftArguments() PeftArguments {
	return PeftArguments{LoraR: 16, LoraAlpha: 32, LoraDropout: 0.05, LoraTargetModules: []string{"q_proj", "v_proj"}}
}

// LoRA is the adapter configuration of p.
func (p *PeftArguments) LoRA() model.LoRAConfig {
	return model.LoRAConfig{R: p.LoraR, Alpha: p.LoraAlpha, Dropout: p.LoraDropout, TargetModules: p.LoraTargetModules, TrainableTokenIndices: p.TrainableTokens}
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
		fmt.Fprintf(log, "LoRA adapter of %s/%s: %s (base weights frozen)\n", modelDir, model.AdapterDir, lc)
		return nil
	}
	if !p.UsePeft {
		return nil
	}
	if err := m.AddLoRA(p.LoRA(), uint64(seed)); err != nil {
		return err
	}
	lc := m.LoRA()
	fmt.Fprintf(log, "LoRA: %s (base weights frozen)\n", lc)
	if frozen := frozenTemplateTokens(modelDir, lc.TrainableTokenIndices); len(frozen) > 0 {
		fmt.Fprintf(log, "LoRA: the chat template uses the added tokens %s, whose embedding rows stay frozen (a token added at import has the mean row, so the policy is unlikely ever to emit it); list their ids in trainable_token_indices to train them\n", strings.Join(frozen, ", "))
	}
	return nil
}

// frozenTemplateTokens lists, as "<tool_call> (49152)", the added tokens of modelDir's tokenizer that are not
// special, appear in its chat template, and are not among trainable: tokens such as mcprl model import
// --add-tokens appends for a tool-call format. It returns nil when the tokenizer or template cannot be read.
func frozenTemplateTokens(modelDir string, trainable []int) []string {
	if modelDir == "" {
		return nil
	}
	tok, err := tokenizer.Load(modelDir)
	if err != nil {
		return nil
	}
	tpl, err := tok.ChatTemplateSource()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range tok.AddedTokens() {
		if !a.Special && strings.Contains(tpl, a.Content) && !slices.Contains(trainable, a.ID) {
			out = append(out, fmt.Sprintf("%s (%d)", a.Content, a.ID))
		}
	}
	return out
}

// Check records the problems of p's values when use_peft is set.
func (p *PeftArguments) Check(c *Checker) {
	if len(p.TrainableTokens) > 0 && !p.UsePeft {
		c.Add("trainable_token_indices", fmt.Errorf("needs use_peft: true (trainable tokens train beside a LoRA adapter)"))
	}
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
