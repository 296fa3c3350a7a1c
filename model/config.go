package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
)

// Architecture is the Hugging Face architecture name this package implements.
const Architecture = "Qwen2ForCausalLM"

// Config holds the Hugging Face config.json fields of a Qwen2 or a Llama model.
type Config struct {
	Architectures     []string `json:"architectures"`
	ModelType         string   `json:"model_type"`
	HiddenSize        int      `json:"hidden_size"`
	IntermediateSize  int      `json:"intermediate_size"`
	NumHiddenLayers   int      `json:"num_hidden_layers"`
	NumAttentionHeads int      `json:"num_attention_heads"`
	NumKeyValueHeads  int      `json:"num_key_value_heads"`
	VocabSize         int      `json:"vocab_size"`
	RopeTheta         float64  `json:"rope_theta"`
	// RopeParameters is where transformers 5 writes rope_theta ({"rope_theta": ..., "rope_type": "default"});
	// ParseConfig moves its rope_theta into RopeTheta. Only the default (unscaled) rotary embedding is supported.
	RopeParameters        map[string]any `json:"rope_parameters,omitempty"`
	RMSNormEps            float64        `json:"rms_norm_eps"`
	TieWordEmbeddings     bool           `json:"tie_word_embeddings"`
	MaxPositionEmbeddings int            `json:"max_position_embeddings"`
	InitializerRange      float64        `json:"initializer_range"`
	HiddenAct             string         `json:"hidden_act"`
	BOSTokenID            *int           `json:"bos_token_id,omitempty"`
	EOSTokenID            TokenIDs       `json:"eos_token_id,omitempty"`
	PadTokenID            *int           `json:"pad_token_id,omitempty"`
	TorchDType            string         `json:"torch_dtype,omitempty"`
	UseSlidingWindow      bool           `json:"use_sliding_window"`
	SlidingWindow         *int           `json:"sliding_window,omitempty"`
	MaxWindowLayers       int            `json:"max_window_layers,omitempty"`
	AttentionDropout      float64        `json:"attention_dropout"`
	UseCache              bool           `json:"use_cache"`
	TransformersVersion   string         `json:"transformers_version,omitempty"`

	// Llama's fields (llama.go).
	AttentionBias *bool           `json:"attention_bias,omitempty"`
	MLPBias       bool            `json:"mlp_bias,omitempty"`
	HeadDimField  int             `json:"head_dim,omitempty"`
	RopeScaling   json.RawMessage `json:"rope_scaling,omitempty"`
}

// TokenIDs is a token id list that reads from JSON either a single number or a list (HF writes both).
// It is written back as a number when it holds exactly one id.
type TokenIDs []int

// UnmarshalJSON accepts a number, a list of numbers or null.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*t = nil
		return nil
	}
	if len(b) > 0 && b[0] == '[' {
		var ids []int
		if err := json.Unmarshal(b, &ids); err != nil {
			return err
		}
		*t = ids
		return nil
	}
	var id int
	if err := json.Unmarshal(b, &id); err != nil {
		return err
	}
	*t = TokenIDs{id}
	return nil
}

// MarshalJSON writes a single id as a number, otherwise a list.
func (t TokenIDs) MarshalJSON() ([]byte, error) {
	if len(t) == 1 {
		return json.Marshal(t[0])
	}
	return json.Marshal([]int(t))
}

// HeadDim is hidden_size / num_attention_heads.
func (c *Config) HeadDim() int { return c.HiddenSize / c.NumAttentionHeads }

// NumParams is the number of parameters (the tied lm_head counted once).
func (c *Config) NumParams() int {
	d, kv := c.HiddenSize, c.NumKeyValueHeads*c.HeadDim()
	perLayer := d*d + 2*kv*d + d*d + 3*d*c.IntermediateSize + 2*d
	if c.attentionBias() {
		perLayer += d + 2*kv
	}
	n := c.VocabSize*d + c.NumHiddenLayers*perLayer + d
	if !c.TieWordEmbeddings {
		n += c.VocabSize * d
	}
	return n
}

// Summary describes the model in one line, as mcprl model init, import and
// info print it: its architecture, parameters and shape.
func (c *Config) Summary() string {
	return fmt.Sprintf("%s, %d parameters (hidden %d, intermediate %d, %d layers, %d heads / %d KV, vocab %d, rope_theta %g, tied %v, eos %v)",
		c.ArchitectureName(), c.NumParams(), c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers, c.NumAttentionHeads,
		c.NumKeyValueHeads, c.VocabSize, c.RopeTheta, c.TieWordEmbeddings, c.EOSIDs())
}

// Validate checks that the configuration describes a Qwen2 or Llama model this package can build.
func (c *Config) Validate() error {
	if c.IsLlama() {
		if err := c.validateLlama(); err != nil {
			return err
		}
	} else if len(c.Architectures) > 0 && !slices.Contains(c.Architectures, Architecture) {
		return fmt.Errorf("model architecture %v is not supported (want %s or %s)", c.Architectures, Architecture, LlamaArchitecture)
	}
	if !c.IsLlama() && c.ModelType != "" && c.ModelType != "qwen2" {
		return fmt.Errorf("model_type %q is not qwen2 or llama", c.ModelType)
	}
	if len(c.Architectures) == 0 && c.ModelType == "" {
		return fmt.Errorf("config names neither architectures nor model_type: want %s / qwen2 or %s / llama", Architecture, LlamaArchitecture)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads}, {"vocab_size", c.VocabSize}} {
		if f.v <= 0 {
			return fmt.Errorf("config %s must be > 0, got %d", f.name, f.v)
		}
	}
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim()%2 != 0 {
		return fmt.Errorf("head dim %d must be even for rotary embeddings", c.HeadDim())
	}
	if c.RopeTheta <= 0 {
		return fmt.Errorf("rope_theta must be > 0, got %g", c.RopeTheta)
	}
	if c.RMSNormEps <= 0 {
		return fmt.Errorf("rms_norm_eps must be > 0, got %g", c.RMSNormEps)
	}
	if c.HiddenAct != "" && c.HiddenAct != "silu" {
		return fmt.Errorf("hidden_act %q not supported (Qwen2 uses silu)", c.HiddenAct)
	}
	if c.UseSlidingWindow {
		return fmt.Errorf("use_sliding_window=true is not supported")
	}
	return nil
}

// FillDefaults sets HF's Qwen2Config defaults for fields a config.json may omit (as ParseConfig does; for a
// configuration built from another format's metadata).
func (c *Config) FillDefaults() {
	if c.IsLlama() {
		c.fillLlamaDefaults()
	}
	if len(c.Architectures) == 0 {
		c.Architectures = []string{Architecture}
	}
	if c.ModelType == "" {
		c.ModelType = "qwen2"
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.InitializerRange == 0 {
		c.InitializerRange = 0.02
	}
	if c.HiddenAct == "" {
		c.HiddenAct = "silu"
	}
	if c.MaxPositionEmbeddings == 0 {
		c.MaxPositionEmbeddings = 32768
	}
}

// ParseConfig parses a Hugging Face config.json, fills HF's defaults and validates it.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{UseCache: true}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("parse config.json: %w", err)
	}
	// An architecture or model type must be named for a config from the outside world.
	if len(c.Architectures) == 0 && c.ModelType == "" {
		return nil, fmt.Errorf("config names neither architectures nor model_type: want %s / qwen2 or %s / llama", Architecture, LlamaArchitecture)
	}
	if err := c.takeRopeParameters(); err != nil {
		return nil, err
	}
	c.FillDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// takeRopeParameters reads transformers 5's rope_parameters into RopeTheta, refusing scaled rotary embeddings
// (which this package does not compute) instead of silently computing the unscaled one.
func (c *Config) takeRopeParameters() error {
	if r := bytes.TrimSpace(c.RopeScaling); len(r) > 0 && string(r) != "null" {
		return fmt.Errorf("rope_scaling %s is not supported (only null)", r)
	}
	if c.RopeParameters == nil {
		return nil
	}
	if v, ok := c.RopeParameters["rope_type"]; ok && v != "default" {
		return fmt.Errorf("rope_parameters.rope_type %v is not supported (only default)", v)
	}
	for _, key := range slices.Sorted(maps.Keys(c.RopeParameters)) {
		v := c.RopeParameters[key]
		switch key {
		case "rope_type":
		case "rope_theta":
			theta, ok := v.(float64)
			if !ok {
				return fmt.Errorf("rope_parameters.rope_theta %v is not a number", v)
			}
			if c.RopeTheta != 0 && c.RopeTheta != theta {
				return fmt.Errorf("rope_theta %g and rope_parameters.rope_theta %g disagree", c.RopeTheta, theta)
			}
			c.RopeTheta = theta
		default:
			return fmt.Errorf("rope_parameters.%s is not supported (only rope_theta with rope_type default)", key)
		}
	}
	c.RopeParameters = nil
	return nil
}

// LoadConfig reads and validates a config.json file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read model config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// JSON renders the config as indented config.json bytes (stable field order).
func (c *Config) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// EOSIDs returns the end-of-sequence ids of the config.
func (c *Config) EOSIDs() []int { return slices.Clone(c.EOSTokenID) }

// Vocabulary is what TinyConfigFor reads of a tokenizer (*tokenizer.Tokenizer has it).
type Vocabulary interface {
	VocabSize() int
	EOS() int
	TokenID(token string) (int, bool)
}

// TinyConfigFor is TinyConfig sized to a chat tokenizer: its vocabulary size, no BOS, <|im_end|> as EOS (the
// tokenizer's EOS when it has no such token) and <|endoftext|> as padding when it has one. It is the model
// `mcprl model init --tokenizer DIR` creates.
func TinyConfigFor(v Vocabulary) *Config {
	eos, ok := v.TokenID("<|im_end|>")
	if !ok {
		eos = v.EOS()
	}
	c := TinyConfig(v.VocabSize(), -1, eos)
	if pad, ok := v.TokenID("<|endoftext|>"); ok {
		c.PadTokenID = &pad
	}
	return c
}

// TinyConfig is the embedded default policy: a Qwen2 of a few million parameters over a reduced
// vocabulary of vocabSize tokens (the reduced tokenizer's size), with tied embeddings.
// bos and eos are the reduced tokenizer's ids (pass -1 to leave them unset).
func TinyConfig(vocabSize, bos, eos int) *Config {
	c := &Config{
		Architectures:         []string{Architecture},
		ModelType:             "qwen2",
		HiddenSize:            256,
		IntermediateSize:      704,
		NumHiddenLayers:       4,
		NumAttentionHeads:     4,
		NumKeyValueHeads:      2,
		VocabSize:             vocabSize,
		RopeTheta:             1000000,
		RMSNormEps:            1e-6,
		TieWordEmbeddings:     true,
		MaxPositionEmbeddings: 4096,
		InitializerRange:      0.02,
		HiddenAct:             "silu",
		TorchDType:            "float32",
		UseCache:              true,
	}
	if bos >= 0 {
		c.BOSTokenID = &bos
	}
	if eos >= 0 {
		c.EOSTokenID = TokenIDs{eos}
	}
	return c
}
