package convert

// Import of GGUF checkpoints (llama.cpp's format) as Hugging Face model directories.
//
// Tensor names map as llama.cpp's convert_hf_to_gguf.py wrote them:
//
//	token_embd.weight -> model.embed_tokens.weight     output_norm.weight -> model.norm.weight
//	output.weight     -> lm_head.weight (absent when the embeddings are tied)
//	blk.N.attn_norm   -> model.layers.N.input_layernorm  blk.N.ffn_norm -> model.layers.N.post_attention_layernorm
//	blk.N.attn_q/k/v/output -> self_attn.q_proj/k_proj/v_proj/o_proj   blk.N.ffn_gate/up/down -> mlp.gate_proj/up_proj/down_proj
//
// For Llama the converter permuted the rows of q_proj and k_proj within each head from rotate_half's layout
// (the two halves of head_dim) to llama.cpp's interleaved pairs; the import undoes that, as transformers'
// GGUF loader does. Qwen2 is stored unpermuted.

import (
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mcprl/mcprl/gguf"
	"github.com/mcprl/mcprl/model"
)

// ggufName maps an HF tensor name of the model to its GGUF name.
func ggufName(hf string) string {
	r := strings.NewReplacer(
		"model.embed_tokens.", "token_embd.", "model.norm.", "output_norm.", "lm_head.", "output.",
		"model.layers.", "blk.", ".input_layernorm.", ".attn_norm.", ".post_attention_layernorm.", ".ffn_norm.",
		".self_attn.q_proj.", ".attn_q.", ".self_attn.k_proj.", ".attn_k.", ".self_attn.v_proj.", ".attn_v.",
		".self_attn.o_proj.", ".attn_output.", ".mlp.gate_proj.", ".ffn_gate.", ".mlp.up_proj.", ".ffn_up.",
		".mlp.down_proj.", ".ffn_down.")
	return r.Replace(hf)
}

// ConfigFromGGUF reads the model's Hugging Face configuration from GGUF metadata ({arch}.block_count,
// embedding_length, ...). general.architecture must be llama or qwen2; rope scaling is refused.
func ConfigFromGGUF(r *gguf.Reader) (*model.Config, error) {
	arch, err := r.String("general.architecture")
	if err != nil {
		return nil, err
	}
	c := &model.Config{UseCache: true, HiddenAct: "silu", InitializerRange: 0.02, TorchDType: "float32"}
	switch arch {
	case "llama":
		c.Architectures, c.ModelType = []string{model.LlamaArchitecture}, "llama"
	case "qwen2":
		c.Architectures, c.ModelType = []string{model.Architecture}, "qwen2"
	default:
		return nil, fmt.Errorf("gguf %s: architecture %q is not supported (llama or qwen2)", r.Path(), arch)
	}
	ints := []struct {
		key string
		dst *int
	}{
		{"block_count", &c.NumHiddenLayers}, {"embedding_length", &c.HiddenSize},
		{"feed_forward_length", &c.IntermediateSize}, {"attention.head_count", &c.NumAttentionHeads},
		{"context_length", &c.MaxPositionEmbeddings},
	}
	for _, f := range ints {
		v, err := r.Uint(arch + "." + f.key)
		if err != nil {
			return nil, err
		}
		*f.dst = int(v)
	}
	// The block count decides how many tensors the import lists and reads: checked against the blocks the file
	// holds tensors for first (block_count 2000000000 would otherwise allocate without bound).
	if n := model.LayerCount(tensorNames(r), "blk."); c.NumHiddenLayers > n {
		return nil, fmt.Errorf("gguf %s: %s.block_count is %d, but the file holds tensors of %d blocks", r.Path(), arch, c.NumHiddenLayers, n)
	}
	c.NumKeyValueHeads = c.NumAttentionHeads
	if v, err := r.Uint(arch + ".attention.head_count_kv"); err == nil {
		c.NumKeyValueHeads = int(v)
	}
	c.RopeTheta = 10000
	if v, err := r.Float(arch + ".rope.freq_base"); err == nil {
		c.RopeTheta = shortFloat(v)
	}
	eps, err := r.Float(arch + ".attention.layer_norm_rms_epsilon")
	if err != nil {
		return nil, err
	}
	c.RMSNormEps = shortFloat(eps)
	if s, err := r.String(arch + ".rope.scaling.type"); err == nil && s != "none" {
		return nil, fmt.Errorf("gguf %s: rope scaling %q is not supported", r.Path(), s)
	}
	if c.NumAttentionHeads <= 0 || c.HiddenSize%c.NumAttentionHeads != 0 {
		return nil, fmt.Errorf("gguf %s: embedding_length %d and head_count %d", r.Path(), c.HiddenSize, c.NumAttentionHeads)
	}
	for _, key := range []string{"rope.dimension_count", "attention.key_length", "attention.value_length"} {
		if v, err := r.Uint(arch + "." + key); err == nil && int(v) != c.HiddenSize/c.NumAttentionHeads {
			return nil, fmt.Errorf("gguf %s: %s.%s = %d, but embedding_length / head_count = %d: not supported",
				r.Path(), arch, key, v, c.HiddenSize/c.NumAttentionHeads)
		}
	}
	if tokens, err := r.Strings("tokenizer.ggml.tokens"); err == nil {
		c.VocabSize = len(tokens)
	}
	if v, err := r.Uint(arch + ".vocab_size"); err == nil {
		c.VocabSize = int(v)
	}
	emb, ok := r.Tensor("token_embd.weight")
	if !ok {
		return nil, fmt.Errorf("gguf %s: no tensor token_embd.weight", r.Path())
	}
	if s := emb.Shape(); len(s) != 2 || s[0] != c.VocabSize || s[1] != c.HiddenSize {
		return nil, fmt.Errorf("gguf %s: token_embd.weight has shape %v, want [%d %d]", r.Path(), s, c.VocabSize, c.HiddenSize)
	}
	_, untied := r.Tensor("output.weight")
	c.TieWordEmbeddings = !untied
	if id, err := r.Uint("tokenizer.ggml.bos_token_id"); err == nil {
		b := int(id)
		c.BOSTokenID = &b
	}
	if id, err := r.Uint("tokenizer.ggml.eos_token_id"); err == nil {
		c.EOSTokenID = model.TokenIDs{int(id)}
	}
	if id, err := r.Uint("tokenizer.ggml.padding_token_id"); err == nil {
		p := int(id)
		c.PadTokenID = &p
	}
	c.FillDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("gguf %s: %w", r.Path(), err)
	}
	return c, nil
}

// tensorNames lists the names of r's tensors.
func tensorNames(r *gguf.Reader) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range r.Tensors {
			if !yield(r.Tensors[i].Name) {
				return
			}
		}
	}
}

// shortFloat rounds a value that GGUF stored as float32 (1e-5 reads 9.999999747378752e-06) to the shortest
// decimal that is the same float32, as the original config.json had it.
func shortFloat(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', -1, 32), 64)
	return f
}

// ImportOptions changes what ImportGGUF writes.
type ImportOptions struct {
	// ChatTemplate, when set, replaces the file's chat template.
	ChatTemplate string
	// AddTokens are appended to the vocabulary as added tokens (not special), as tokenizer.add_tokens then
	// model.resize_token_embeddings do in transformers; their embedding rows (and lm_head rows when untied) are
	// the mean of the existing rows.
	AddTokens []string
}

// ImportGGUF writes the GGUF file at path as a Hugging Face model directory dir: config.json,
// generation_config.json, model.safetensors (float32: every tensor dequantized, q/k rows of Llama unpermuted) and
// the tokenizer (tokenizer.json, tokenizer_config.json with the chat template). It fails, naming the problem, on
// an unsupported architecture, quantization, tokenizer or a truncated file, before writing anything.
func ImportGGUF(path, dir string, opts ImportOptions) (*model.Config, error) {
	r, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cfg, err := ConfigFromGGUF(r)
	if err != nil {
		return nil, err
	}
	tokJSON, tokCfg, err := TokenizerFiles(r, TokenizerOptions{ChatTemplate: opts.ChatTemplate, AddTokens: opts.AddTokens})
	if err != nil {
		return nil, err
	}
	fileVocab := cfg.VocabSize
	cfg.VocabSize += len(opts.AddTokens)
	weights := cfg.Weights()
	for _, w := range weights { // every tensor is there and of a supported type before anything is read
		t, ok := r.Tensor(ggufName(w.Name))
		if !ok {
			return nil, fmt.Errorf("gguf %s: tensor %s (%s) missing", path, ggufName(w.Name), w.Name)
		}
		if !gguf.CanDequantize(t.Type) {
			return nil, fmt.Errorf("gguf %s: tensor %s has type %s, which cannot be imported (supported: %v)", path, t.Name, t.Type, gguf.DequantizableTypes())
		}
		want := w.Shape
		if grown(w.Name) {
			want = []int{fileVocab, w.Shape[1]}
		}
		if got := t.Shape(); !slices.Equal(got, want) {
			return nil, fmt.Errorf("gguf %s: tensor %s has shape %v, want %v for %s", path, t.Name, got, want, w.Name)
		}
	}
	all := make([][]float32, 0, len(weights))
	for _, w := range weights {
		data, err := r.Float32(ggufName(w.Name))
		if err != nil {
			return nil, err
		}
		if nf := model.NonFinite(ggufName(w.Name), data); nf != "" {
			slog.Warn("model: import " + path + ": tensor " + nf + ": the model computes NaN wherever these values reach")
		}
		if grown(w.Name) {
			data = appendMeanRows(data, w.Shape[1], len(opts.AddTokens))
		}
		if heads := permutedHeads(cfg, w.Name); heads > 0 {
			data = unpermuteRotary(data, heads, w.Shape)
		}
		all = append(all, data)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	for name, data := range map[string][]byte{"tokenizer.json": tokJSON, "tokenizer_config.json": tokCfg} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, fmt.Errorf("import %s: %w", path, err)
		}
	}
	if err := model.WriteCheckpoint(dir, cfg, all); err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return cfg, nil
}

// grown reports whether a tensor has one row per vocabulary id.
func grown(hfName string) bool {
	return hfName == "model.embed_tokens.weight" || hfName == "lm_head.weight"
}

// appendMeanRows appends n rows, each the mean of the existing rows of width d (in float64).
func appendMeanRows(data []float32, d, n int) []float32 {
	if n == 0 {
		return data
	}
	mean := make([]float64, d)
	rows := len(data) / d
	for r := range rows {
		for j, v := range data[r*d : (r+1)*d] {
			mean[j] += float64(v)
		}
	}
	row := make([]float32, d)
	for j := range row {
		row[j] = float32(mean[j] / float64(rows))
	}
	for range n {
		data = append(data, row...)
	}
	return data
}

// permutedHeads is the number of heads of a tensor whose rows llama.cpp's converter permutes (a Llama q_proj or
// k_proj weight), 0 for any other tensor.
func permutedHeads(c *model.Config, hfName string) int {
	switch {
	case !c.IsLlama():
		return 0
	case strings.HasSuffix(hfName, "q_proj.weight"):
		return c.NumAttentionHeads
	case strings.HasSuffix(hfName, "k_proj.weight"):
		return c.NumKeyValueHeads
	}
	return 0
}

// unpermuteRotary undoes llama.cpp's permutation of a Llama q_proj or k_proj weight [heads*headDim, in]: within
// each head, GGUF row 2j+h holds HF row h*headDim/2 + j (h = 0, 1; j < headDim/2).
func unpermuteRotary(w []float32, heads int, shape []int) []float32 {
	return permuteRotaryRows(w, heads, shape, false)
}

// permuteRotary is llama.cpp's converter's permutation of a Llama q_proj or k_proj weight, unpermuteRotary's inverse.
func permuteRotary(w []float32, heads int, shape []int) []float32 {
	return permuteRotaryRows(w, heads, shape, true)
}

// permuteRotaryRows moves HF row h*headDim/2 + j of each head to GGUF row 2j+h (toGGUF), or back.
func permuteRotaryRows(w []float32, heads int, shape []int, toGGUF bool) []float32 {
	rows, cols := shape[0], shape[1]
	hd := rows / heads
	half := hd / 2
	out := make([]float32, len(w))
	for head := range heads {
		for j := range half {
			for h := range 2 {
				gg := (head*hd + 2*j + h) * cols
				hf := (head*hd + h*half + j) * cols
				if toGGUF {
					copy(out[gg:gg+cols], w[hf:hf+cols])
				} else {
					copy(out[hf:hf+cols], w[gg:gg+cols])
				}
			}
		}
	}
	return out
}
