package model

// The Llama architecture (Hugging Face LlamaForCausalLM) runs on the same graph as Qwen2 (qwen2.go). Following
// transformers' modeling_llama.py, it differs from Qwen2 only in its configuration:
//
//	q_proj, k_proj, v_proj, o_proj carry a bias only when attention_bias is true (default false; Qwen2's q/k/v always do)
//	gate_proj, up_proj, down_proj carry a bias only when mlp_bias is true (not supported: no Llama checkpoint uses it)
//	head_dim may be given explicitly (default hidden_size / num_attention_heads; it must equal that here)
//	rope_theta defaults to 10000, rms_norm_eps to 1e-6, tie_word_embeddings to false, as LlamaConfig's defaults
//	rope_scaling must be absent or null (llama3, linear, dynamic and yarn scaling are not implemented)
//
// RMSNorm, the rotary embedding (rotate_half on the two halves of head_dim, inv_freq = 1/theta^(2i/d)), grouped-query
// attention, SwiGLU and the tied or untied lm_head are the same formulas as Qwen2's.

import (
	"bytes"
	"fmt"
	"slices"
)

// LlamaArchitecture is the Hugging Face architecture name of Llama models (SmolLM2 among them).
const LlamaArchitecture = "LlamaForCausalLM"

// IsLlama reports whether the config describes a Llama model (else Qwen2).
func (c *Config) IsLlama() bool {
	return c.ModelType == "llama" || slices.Contains(c.Architectures, LlamaArchitecture)
}

// ArchitectureName is the config's Hugging Face architecture: LlamaArchitecture or Architecture (Qwen2).
func (c *Config) ArchitectureName() string {
	if c.IsLlama() {
		return LlamaArchitecture
	}
	return Architecture
}

// attentionBias reports whether q_proj, k_proj and v_proj have biases (o_proj's is checked in validateLlama).
func (c *Config) attentionBias() bool {
	if c.IsLlama() {
		return c.AttentionBias != nil && *c.AttentionBias
	}
	return true
}

// fillLlamaDefaults sets LlamaConfig's defaults where they differ from Qwen2Config's.
func (c *Config) fillLlamaDefaults() {
	if len(c.Architectures) == 0 {
		c.Architectures = []string{LlamaArchitecture}
	}
	if c.ModelType == "" {
		c.ModelType = "llama"
	}
	if c.MaxPositionEmbeddings == 0 {
		c.MaxPositionEmbeddings = 2048
	}
	if c.AttentionBias == nil {
		f := false
		c.AttentionBias = &f
	}
}

// validateLlama checks what this package implements of LlamaConfig.
func (c *Config) validateLlama() error {
	if len(c.Architectures) > 0 && !slices.Contains(c.Architectures, LlamaArchitecture) {
		return fmt.Errorf("model architecture %v with model_type llama (want %s)", c.Architectures, LlamaArchitecture)
	}
	if c.ModelType != "" && c.ModelType != "llama" {
		return fmt.Errorf("model_type %q with architecture %s (want llama)", c.ModelType, LlamaArchitecture)
	}
	if c.AttentionBias != nil && *c.AttentionBias {
		return fmt.Errorf("attention_bias=true is not supported for %s (o_proj would need a bias)", LlamaArchitecture)
	}
	if c.MLPBias {
		return fmt.Errorf("mlp_bias=true is not supported")
	}
	if c.HeadDimField != 0 && c.HeadDimField != c.HiddenSize/c.NumAttentionHeads {
		return fmt.Errorf("head_dim %d differs from hidden_size / num_attention_heads = %d: not supported",
			c.HeadDimField, c.HiddenSize/c.NumAttentionHeads)
	}
	if r := bytes.TrimSpace(c.RopeScaling); len(r) > 0 && string(r) != "null" {
		return fmt.Errorf("rope_scaling %s is not supported (only null)", r)
	}
	return nil
}
