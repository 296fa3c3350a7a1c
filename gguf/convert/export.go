package convert

// Export of Hugging Face model directories as GGUF files that llama.cpp and Ollama load, following llama.cpp's
// convert_hf_to_gguf.py: the tensor names of import.go, Llama's q_proj and k_proj rows permuted to llama.cpp's
// rotary layout, the hyperparameters under the architecture's keys, and the tokenizer and chat template
// (TokenizerMetadata). A tied lm_head is not written: llama.cpp then uses token_embd.weight, as the
// converter leaves it.
//
// Types, as the converter's --outtype chooses them: norms and biases (one-dimensional tensors) stay F32; the
// matrices are F32, F16 or Q8_0, and a matrix whose rows are not whole Q8_0 blocks of 32 falls back to F16.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/mcprl/mcprl/gguf"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/tokenizer"
)

// exportDTypes are the values of ExportOptions.DType, with general.file_type (llama_ftype) of each.
var exportDTypes = map[string]struct {
	Type     gguf.TensorType
	FileType uint32
}{"f32": {gguf.F32, 0}, "f16": {gguf.F16, 1}, "q8_0": {gguf.Q8_0, 7}}

// ExportOptions changes what ExportGGUF writes.
type ExportOptions struct {
	// DType of the weight matrices: "f32" (the default), "f16" or "q8_0".
	DType string
	// Name is general.name; empty means the directory's base name.
	Name string
}

// ExportGGUF writes the Hugging Face model directory dir (config.json, safetensors weights, tokenizer.json and
// tokenizer_config.json with a chat template) as the GGUF file path, and returns the tensor types it wrote with
// their counts. It fails before writing anything, naming the setting or tensor, on what llama.cpp would run
// differently or not at all: an unmerged LoRA adapter, rope scaling, a sliding window, a tokenizer llama.cpp
// cannot reproduce, a tensor the architecture lacks; and, while writing, on a tensor that is not finite. The
// file appears at path only once complete.
func ExportGGUF(dir, path string, opts ExportOptions) (map[gguf.TensorType]int, error) {
	if opts.DType == "" {
		opts.DType = "f32"
	}
	dt, ok := exportDTypes[opts.DType]
	if !ok {
		return nil, fmt.Errorf("export %s: dtype %q is not supported (f32, f16 or q8_0)", dir, opts.DType)
	}
	if _, err := os.Stat(filepath.Join(dir, model.AdapterDir, "adapter_config.json")); err == nil {
		return nil, fmt.Errorf("export %s: it has a LoRA adapter in %s/, which GGUF would drop: fold it in first with `mcprl model merge --model %s --out DIR`",
			dir, model.AdapterDir, dir)
	}
	cfg, err := model.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", dir, err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", dir, err)
	}
	tokMeta, err := TokenizerMetadata(tok, cfg.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", dir, err)
	}
	ck, err := model.OpenCheckpoint(dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", dir, err)
	}
	defer ck.Close()

	name := opts.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	meta := append(ggufHyperparameters(cfg, name, dt.FileType), tokMeta...)
	if cfg.BOSTokenID != nil && !hasKey(meta, "tokenizer.ggml.bos_token_id") {
		// tokenizer_config.json names no bos_token (Qwen2.5's): the converter takes config.json's bos_token_id.
		meta = append(meta, gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: uint32(*cfg.BOSTokenID)})
	}

	counts := map[gguf.TensorType]int{}
	var tensors []gguf.WriteTensor
	for _, w := range cfg.Weights() {
		typ := dt.Type
		switch {
		case len(w.Shape) == 1:
			typ = gguf.F32
		case typ == gguf.Q8_0 && w.Shape[len(w.Shape)-1]%32 != 0:
			typ = gguf.F16
		}
		counts[typ]++
		tensors = append(tensors, gguf.WriteTensor{Name: ggufName(w.Name), Type: typ, Shape: w.Shape,
			Data: func() ([]byte, error) {
				data, err := ck.Read(w)
				if err != nil {
					return nil, err
				}
				for i, v := range data {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						return nil, fmt.Errorf("%s of %s holds %v at index %d: not a finite weight", w.Name, dir, v, i)
					}
				}
				if heads := permutedHeads(cfg, w.Name); heads > 0 {
					data = permuteRotary(data, heads, w.Shape)
				}
				return gguf.Quantize(typ, data)
			}})
	}

	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.part")
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if err := gguf.Write(tmp, meta, tensors); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("export %s to %s: %w", dir, path, err)
	}
	if err := errors.Join(tmp.Chmod(0o644), tmp.Close()); err != nil {
		return nil, fmt.Errorf("export %s to %s: %w", dir, path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("export %s: %w", dir, err)
	}
	return counts, nil
}

// ggufHyperparameters is the general.* and {arch}.* metadata of cfg, with the keys and types
// convert_hf_to_gguf.py writes (ConfigFromGGUF reads them back).
func ggufHyperparameters(cfg *model.Config, name string, fileType uint32) []gguf.KV {
	arch := "qwen2"
	if cfg.IsLlama() {
		arch = "llama"
	}
	kv := []gguf.KV{
		{Key: "general.architecture", Value: arch},
		{Key: "general.type", Value: "model"},
		{Key: "general.name", Value: name},
		{Key: arch + ".block_count", Value: uint32(cfg.NumHiddenLayers)},
		{Key: arch + ".context_length", Value: uint32(cfg.MaxPositionEmbeddings)},
		{Key: arch + ".embedding_length", Value: uint32(cfg.HiddenSize)},
		{Key: arch + ".feed_forward_length", Value: uint32(cfg.IntermediateSize)},
		{Key: arch + ".attention.head_count", Value: uint32(cfg.NumAttentionHeads)},
		{Key: arch + ".attention.head_count_kv", Value: uint32(cfg.NumKeyValueHeads)},
		{Key: arch + ".rope.freq_base", Value: float32(cfg.RopeTheta)},
		{Key: arch + ".attention.layer_norm_rms_epsilon", Value: float32(cfg.RMSNormEps)},
		{Key: arch + ".vocab_size", Value: uint32(cfg.VocabSize)},
		{Key: arch + ".rope.dimension_count", Value: uint32(cfg.HeadDim())},
	}
	return append(kv,
		gguf.KV{Key: "general.file_type", Value: fileType},
		gguf.KV{Key: "general.quantization_version", Value: uint32(2)})
}

func hasKey(kv []gguf.KV, key string) bool {
	for _, e := range kv {
		if e.Key == key {
			return true
		}
	}
	return false
}
