package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/mcprl/mcprl/internal/kernels"
)

// Model is a Qwen2 causal LM: its configuration, the backend graphs run on, and its variables in Ctx under scopes
// mirroring the Hugging Face tensor names. Graph functions (Logits, TokenLogProbs) read the variables from the
// context they are given; the trainer passes m.Ctx (which also holds its optimizer state) and sampling sessions
// always see the variables' current values.
type Model struct {
	Config  Config
	Backend backends.Backend
	Ctx     *context.Context
	// GenerationConfig is generation_config.json as loaded (written back by Save); nil means a default one.
	GenerationConfig json.RawMessage

	// NonFinite names the tensors Load found holding NaN or infinite values, with their counts ("name: 3 NaN,
	// 0 infinite"). Load still loads them, and logs a warning for each (slog's default logger): such a model
	// computes NaN wherever one of those values reaches, as it would in transformers.
	NonFinite []string

	mu         sync.Mutex
	stepExec   *context.Exec
	logitsExec *context.Exec
	lora       *LoRAConfig // the attached adapter (lora.go), nil without one
}

// resetExecs drops the compiled sampling graphs (after the set of variables changed).
func (m *Model) resetExecs() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stepExec, m.logitsExec = nil, nil
}

// paramKind says how HF initializes a tensor.
type paramKind int

const (
	initNormal paramKind = iota
	initZeros
	initOnes
)

// param is one tensor of the checkpoint.
type param struct {
	name  string // HF name, e.g. model.layers.0.self_attn.q_proj.weight
	shape []int
	kind  paramKind
}

// params lists the model's tensors in HF order (lm_head only when untied).
func (c *Config) params() []param {
	d, kv, inter := c.HiddenSize, c.NumKeyValueHeads*c.HeadDim(), c.IntermediateSize
	ps := []param{{"model.embed_tokens.weight", []int{c.VocabSize, d}, initNormal}}
	for i := range c.NumHiddenLayers {
		p := "model.layers." + strconv.Itoa(i) + "."
		ps = append(ps,
			param{p + "self_attn.q_proj.weight", []int{d, d}, initNormal},
			param{p + "self_attn.k_proj.weight", []int{kv, d}, initNormal},
			param{p + "self_attn.v_proj.weight", []int{kv, d}, initNormal},
		)
		if c.attentionBias() {
			ps = append(ps,
				param{p + "self_attn.q_proj.bias", []int{d}, initZeros},
				param{p + "self_attn.k_proj.bias", []int{kv}, initZeros},
				param{p + "self_attn.v_proj.bias", []int{kv}, initZeros},
			)
		}
		ps = append(ps,
			param{p + "self_attn.o_proj.weight", []int{d, d}, initNormal},
			param{p + "mlp.gate_proj.weight", []int{inter, d}, initNormal},
			param{p + "mlp.up_proj.weight", []int{inter, d}, initNormal},
			param{p + "mlp.down_proj.weight", []int{d, inter}, initNormal},
			param{p + "input_layernorm.weight", []int{d}, initOnes},
			param{p + "post_attention_layernorm.weight", []int{d}, initOnes},
		)
	}
	ps = append(ps, param{"model.norm.weight", []int{d}, initOnes})
	if !c.TieWordEmbeddings {
		ps = append(ps, param{"lm_head.weight", []int{c.VocabSize, d}, initNormal})
	}
	return ps
}

// TensorNames lists the Hugging Face tensor names of the model (lm_head.weight only when untied).
func (c *Config) TensorNames() []string {
	var names []string
	for _, p := range c.params() {
		names = append(names, p.name)
	}
	return names
}

// scopeOf maps an HF tensor name to the context scope and variable name holding it.
func scopeOf(hfName string) (scope, name string) {
	i := strings.LastIndexByte(hfName, '.')
	return "/" + strings.ReplaceAll(hfName[:i], ".", "/"), hfName[i+1:]
}

func newModel(backend backends.Backend, cfg *Config) (*Model, error) {
	if backend == nil {
		return nil, errors.New("model: nil backend (use NewBackend)")
	}
	c := *cfg
	c.FillDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// The gradient of DotGeneral as two DotGenerals; on a GoMLX whose internals differ from the pinned
	// one, GoMLX's own stays (GradientEngine says so).
	kernels.InstallDotGradient(backend) //nolint:errcheck // reported by GradientEngine
	return &Model{Config: c, Backend: backend, Ctx: context.New()}, nil
}

func (m *Model) setParam(p param, data []float32) {
	scope, name := scopeOf(p.name)
	m.Ctx.InAbsPath(scope).Checked(false).VariableWithValue(name, tensors.FromFlatDataAndDimensions(data, p.shape...))
}

// New creates a model with random weights initialized as Hugging Face does (normal with std initializer_range
// for linear and embedding weights, zero biases, unit norm weights; the pad_token_id embedding row zeroed),
// deterministic for a seed.
func New(backend backends.Backend, cfg *Config, seed uint64) (*Model, error) {
	m, err := newModel(backend, cfg)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d6f64656c)) // "model"
	std := m.Config.InitializerRange
	for _, p := range m.Config.params() {
		n := 1
		for _, d := range p.shape {
			n *= d
		}
		data := make([]float32, n)
		switch p.kind {
		case initNormal:
			for i := range data {
				data[i] = float32(rng.NormFloat64() * std)
			}
			if p.name == "model.embed_tokens.weight" && m.Config.PadTokenID != nil {
				if pad := *m.Config.PadTokenID; pad >= 0 && pad < m.Config.VocabSize {
					clear(data[pad*m.Config.HiddenSize : (pad+1)*m.Config.HiddenSize])
				}
			}
		case initOnes:
			for i := range data {
				data[i] = 1
			}
		}
		m.setParam(p, data)
	}
	return m, nil
}

// Load reads a Hugging Face Qwen2 or Llama model directory: config.json, model.safetensors or the shards named by
// model.safetensors.index.json (F32, BF16 or F16 tensors, converted to float32), generation_config.json if
// present, and the LoRA adapter in AdapterDir if there is one. It fails with a clear error on a non-Qwen2 architecture, a missing tensor or a wrong shape.
func Load(backend backends.Backend, dir string) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	m, err := newModel(backend, cfg)
	if err != nil {
		return nil, err
	}
	if gc, err := os.ReadFile(filepath.Join(dir, "generation_config.json")); err == nil {
		m.GenerationConfig = gc
	}

	ck, err := OpenCheckpoint(dir, &m.Config)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	for _, p := range m.Config.params() {
		data, err := ck.read(p)
		if err != nil {
			return nil, err
		}
		if w := NonFinite(p.name, data); w != "" {
			m.NonFinite = append(m.NonFinite, w)
			slog.Warn("model: load " + dir + ": tensor " + w + ": the model computes NaN wherever these values reach")
		}
		m.setParam(p, data)
	}
	if _, err := os.Stat(filepath.Join(dir, AdapterDir, "adapter_config.json")); err == nil {
		if err := m.LoadAdapter(filepath.Join(dir, AdapterDir)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Checkpoint is a model directory's safetensors weights: model.safetensors, or the shards that
// model.safetensors.index.json names.
type Checkpoint struct {
	dir    string
	fileOf map[string]string  // tensor name -> file
	files  map[string]*stFile // open files by path
}

// OpenCheckpoint opens dir's weights for cfg and checks that they hold no tensor the architecture lacks (a bias Qwen2
// lacks, quantization scales, another model's layers would be ignored silently and the model would compute
// something else): such a tensor is refused by name.
func OpenCheckpoint(dir string, cfg *Config) (*Checkpoint, error) {
	ck := &Checkpoint{dir: dir, fileOf: map[string]string{}, files: map[string]*stFile{}}
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	if data, err := os.ReadFile(indexPath); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &idx); err != nil {
			return nil, fmt.Errorf("parse %s: %w", indexPath, err)
		}
		for name, file := range idx.WeightMap {
			ck.fileOf[name] = filepath.Join(dir, filepath.Base(file))
		}
	} else if errors.Is(err, os.ErrNotExist) {
		path := filepath.Join(dir, "model.safetensors")
		single, err := openSafetensors(path)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", dir, err)
		}
		ck.files[path] = single
		for name := range single.entries {
			ck.fileOf[name] = path
		}
	} else {
		return nil, fmt.Errorf("read %s: %w", indexPath, err)
	}
	// The layer count decides how many parameters there are: checked against the tensors present before they
	// are listed (config.json's num_hidden_layers 2000000000 would otherwise allocate without bound).
	if n := LayerCount(maps.Keys(ck.fileOf), "model.layers."); cfg.NumHiddenLayers > n {
		ck.Close()
		return nil, fmt.Errorf("load %s: config.json says num_hidden_layers %d, but the weights hold tensors of %d layers",
			dir, cfg.NumHiddenLayers, n)
	}
	known := map[string]bool{}
	for _, p := range cfg.params() {
		known[p.name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(ck.fileOf)) {
		if known[name] || (name == "lm_head.weight" && cfg.TieWordEmbeddings) {
			continue // transformers too ignores a tied checkpoint's copy of the embeddings
		}
		ck.Close()
		return nil, fmt.Errorf("load %s: tensor %q is not a parameter of %v (hidden %d, %d layers, tied embeddings %v); mcprl does not support it",
			dir, name, cfg.Architectures, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.TieWordEmbeddings)
	}
	return ck, nil
}

// LayerCount is the number of distinct layer indices N among names of the form prefix+N+"." (model.layers.N. in
// a safetensors checkpoint, blk.N. in GGUF).
func LayerCount(names iter.Seq[string], prefix string) int {
	seen := map[string]bool{}
	for name := range names {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		idx, _, ok := strings.Cut(rest, ".")
		if _, err := strconv.ParseUint(idx, 10, 31); ok && err == nil {
			seen[idx] = true
		}
	}
	return len(seen)
}

// NonFinite describes the NaN and infinite values of a tensor ("name: 3 NaN, 1 infinite of 4096 values"), or
// returns "" when it has none.
func NonFinite(name string, data []float32) string {
	nan, inf := 0, 0
	for _, v := range data {
		switch {
		case v != v:
			nan++
		case math.IsInf(float64(v), 0):
			inf++
		}
	}
	if nan == 0 && inf == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %d NaN, %d infinite of %d values", name, nan, inf, len(data))
}

// read returns p's values as float32, checking its shape.
func (ck *Checkpoint) read(p param) ([]float32, error) {
	path, ok := ck.fileOf[p.name]
	if !ok {
		return nil, fmt.Errorf("load %s: tensor %q missing", ck.dir, p.name)
	}
	f := ck.files[path]
	if f == nil {
		var err error
		if f, err = openSafetensors(path); err != nil {
			return nil, fmt.Errorf("load %s: %w", ck.dir, err)
		}
		ck.files[path] = f
	}
	data, err := f.readF32(p.name, p.shape)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", ck.dir, err)
	}
	return data, nil
}

func (ck *Checkpoint) Close() {
	for _, f := range ck.files {
		f.Close()
	}
}

// AdapterDir is the subdirectory of a model directory where Save writes the model's LoRA adapter (peft's
// adapter_config.json and adapter_model.safetensors) and Load finds it.
const AdapterDir = "adapter"

// Tensor returns a copy of the HF-named tensor's values as float32 (widened when the model stores it in bfloat16,
// SetBF16) and its shape.
func (m *Model) Tensor(hfName string) ([]float32, []int, error) {
	scope, name := scopeOf(hfName)
	v := m.Ctx.GetVariableByScopeAndName(scope, name)
	if v == nil {
		return nil, nil, fmt.Errorf("model has no tensor %q", hfName)
	}
	t, err := v.Value()
	if err != nil {
		return nil, nil, fmt.Errorf("tensor %q: %w", hfName, err)
	}
	data, err := float32Data(t)
	if err != nil {
		return nil, nil, fmt.Errorf("tensor %q: %w", hfName, err)
	}
	return data, t.Shape().Dimensions, nil
}

// Freeze makes every base weight not trainable, as a model that nothing trains (a reference model, one that only
// samples or evaluates) has them; with bf16 (SetBF16) they are then all stored in bfloat16. A LoRA adapter freezes
// the base weights itself.
func (m *Model) Freeze() error {
	m.setBaseTrainable(false)
	if err := m.storeWeights(); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	return nil
}

// SaveOptions configures Save.
type SaveOptions struct {
	// DType of the written tensors: "float32" (default) or "bfloat16".
	DType string
	// TokenizerDir, when set, is a directory whose tokenizer files (tokenizer.json, tokenizer_config.json,
	// vocab.json, merges.txt, added_tokens.json, special_tokens_map.json, chat_template.jinja) are copied.
	TokenizerDir string
	// MaxShardBytes > 0 splits the weights into model-0000i-of-0000n.safetensors files of at most about this
	// size plus model.safetensors.index.json, as transformers does; 0 writes one model.safetensors.
	MaxShardBytes int64
}

// tokenizerFiles are copied by Save when SaveOptions.TokenizerDir is set.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
	"added_tokens.json", "special_tokens_map.json", "chat_template.jinja"}

// Save writes a Hugging Face model directory that transformers, vLLM and llama.cpp's converter accept:
// config.json, generation_config.json, model.safetensors (or shards and an index) and tokenizer files.
// Saving the same weights twice gives byte-identical files.
func (m *Model) Save(dir string, opts SaveOptions) error {
	stDType, torchDType := "F32", "float32"
	switch opts.DType {
	case "", "float32":
	case "bfloat16":
		stDType, torchDType = "BF16", "bfloat16"
	default:
		return fmt.Errorf("save model: dtype %q not supported (float32 or bfloat16)", opts.DType)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	cfg := m.Config
	cfg.TorchDType = torchDType
	cfgJSON, err := cfg.JSON()
	if err != nil {
		return fmt.Errorf("save model config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfgJSON, 0o644); err != nil {
		return fmt.Errorf("save model config: %w", err)
	}
	gen := m.GenerationConfig
	if gen == nil {
		if gen, err = cfg.defaultGenerationConfig(); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), gen, 0o644); err != nil {
		return fmt.Errorf("save generation config: %w", err)
	}

	var all []stTensor
	for _, p := range m.Config.params() {
		data, shape, err := m.Tensor(p.name)
		if err != nil {
			return fmt.Errorf("save model: %w", err)
		}
		all = append(all, stTensor{name: p.name, shape: shape, data: data})
	}
	if err := m.writeWeights(dir, all, stDType, opts.MaxShardBytes); err != nil {
		return err
	}
	if m.lora != nil {
		if err := m.SaveAdapter(filepath.Join(dir, AdapterDir)); err != nil {
			return err
		}
	}
	if opts.TokenizerDir != "" {
		for _, name := range tokenizerFiles {
			if err := copyFile(filepath.Join(opts.TokenizerDir, name), filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("save model: copy tokenizer file: %w", err)
			}
		}
	}
	return nil
}

// defaultGenerationConfig is the generation_config.json transformers derives from a config: its bos, eos and pad ids.
func (c *Config) defaultGenerationConfig() ([]byte, error) {
	g := map[string]any{"_from_model_config": true}
	if c.BOSTokenID != nil {
		g["bos_token_id"] = *c.BOSTokenID
	}
	if len(c.EOSTokenID) > 0 {
		g["eos_token_id"] = c.EOSTokenID
	}
	if c.PadTokenID != nil {
		g["pad_token_id"] = *c.PadTokenID
	}
	gen, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(gen, '\n'), nil
}

func (m *Model) writeWeights(dir string, all []stTensor, stDType string, maxShard int64) error {
	elem := int64(4)
	if stDType == "BF16" {
		elem = 2
	}
	if maxShard <= 0 {
		return writeSafetensors(filepath.Join(dir, "model.safetensors"), all, stDType)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	var shards [][]stTensor
	var size, total int64
	for _, t := range all {
		b := int64(len(t.data)) * elem
		total += b
		if len(shards) == 0 || (size+b > maxShard && size > 0) {
			shards = append(shards, nil)
			size = 0
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], t)
		size += b
	}
	weightMap := map[string]string{}
	for i, sh := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		for _, t := range sh {
			weightMap[t.name] = name
		}
		if err := writeSafetensors(filepath.Join(dir, name), sh, stDType); err != nil {
			return err
		}
	}
	idx, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), append(idx, '\n'), 0o644)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
