package model

// LoRA (Hu et al. 2021) as Hugging Face peft implements it, with peft's names and file layout, for Qwen2 and Llama:
// a targeted nn.Linear y = x W^T (+ b) becomes
//
//	y = x W^T (+ b) + (x A^T B^T) * lora_alpha / r        A: lora_A.weight [r, in], B: lora_B.weight [out, r]
//
// With lora_dropout p > 0 the adapter's branch reads dropout(x) instead of x, as peft's nn.Dropout on the branch's
// input (result + lora_B(lora_A(dropout(x))) * scaling): each element is zeroed with probability p and the kept
// ones are scaled by 1/(1-p), with a mask drawn per targeted module and per call. Dropout acts only in graphs
// marked as training (context.SetTraining), which the GRPO and SFT loss graphs are; sampling, log-probs for the
// old and reference policies, evaluation and Merge compute the branch on x, as peft in eval mode. With p = 0 no
// dropout node is built at all. The masks draw from the context's random state, which SeedDropout sets from
// the run's seed and the optimizer step.
//
// A starts as peft's kaiming_uniform_(a=sqrt(5)) (uniform in ±1/sqrt(in)) and B at zero, so a fresh adapter leaves
// the model unchanged. With an adapter attached the base weights are not trainable: training updates A and B only.
// Adapters save as adapter_config.json + adapter_model.safetensors (tensor names
// "base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight", ...), which peft's PeftModel.from_pretrained
// loads on the same base; Merge folds B A * alpha / r into W for export as a plain checkpoint.
//
// An adapter may also train the embedding rows of a few token ids (trainable_token_indices, peft's trainable
// tokens): tokens.go.
//
// Variables: scope /model/layers/N/self_attn/q_proj/lora_A, variable "weight" (likewise lora_B), and the
// non-trainable scalar "lora_scaling" in the module's scope (/model/layers/N/self_attn/q_proj); lora_dropout is the
// context parameter loraDropoutParam at the root scope.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// LoRAConfig holds peft LoraConfig's fields that this package implements (TRL's ModelConfig names them lora_r,
// lora_alpha, lora_dropout, lora_target_modules).
type LoRAConfig struct {
	R             int      `json:"r"`
	Alpha         float64  `json:"lora_alpha"`
	Dropout       float64  `json:"lora_dropout"`
	TargetModules []string `json:"target_modules"`
	// TrainableTokenIndices are token ids whose embedding rows train beside the adapter (tokens.go).
	TrainableTokenIndices []int `json:"trainable_token_indices"`
}

// String describes the adapter in one line, as training logs and mcprl
// model merge print it: "r 16, alpha 32, dropout 0.05, [q_proj v_proj]" and
// the trainable tokens when there are any.
func (c *LoRAConfig) String() string {
	s := fmt.Sprintf("r %d, alpha %g, dropout %g, %v", c.R, c.Alpha, c.Dropout, c.TargetModules)
	if len(c.TrainableTokenIndices) > 0 {
		s += fmt.Sprintf(", trainable tokens %v", c.TrainableTokenIndices)
	}
	return s
}

// loraModules are the linear layers of a decoder layer that LoRA can target, with their scope under the layer.
var loraModules = map[string]string{
	"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
	"gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp",
}

// Validate checks r, alpha, dropout and the target modules ("all-linear" names all seven).
func (c *LoRAConfig) Validate() error {
	if c.R <= 0 {
		return fmt.Errorf("lora: r must be > 0, got %d", c.R)
	}
	if c.Alpha <= 0 {
		return fmt.Errorf("lora: lora_alpha must be > 0, got %g", c.Alpha)
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		return fmt.Errorf("lora: lora_dropout must be in [0, 1), got %g", c.Dropout)
	}
	if len(c.TargetModules) == 0 {
		return fmt.Errorf("lora: no target_modules")
	}
	for _, t := range c.TargetModules {
		if _, ok := loraModules[t]; !ok && t != "all-linear" {
			return fmt.Errorf("lora: target module %q is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, all-linear", t)
		}
	}
	return nil
}

// targets lists the targeted modules in a fixed order.
func (c *LoRAConfig) targets() []string {
	var out []string
	for _, name := range []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} {
		if slices.Contains(c.TargetModules, name) || slices.Contains(c.TargetModules, "all-linear") {
			out = append(out, name)
		}
	}
	return out
}

// loraParam is one targeted linear layer: the HF name prefix of its module ("model.layers.0.self_attn.q_proj")
// and its weight's shape [out, in].
type loraParam struct {
	module  string
	out, in int
}

func (m *Model) loraParams(cfg *LoRAConfig) []loraParam {
	var ps []loraParam
	shapes := map[string][]int{}
	for _, p := range m.Config.params() {
		shapes[p.name] = p.shape
	}
	for i := range m.Config.NumHiddenLayers {
		for _, t := range cfg.targets() {
			mod := "model.layers." + strconv.Itoa(i) + "." + loraModules[t] + "." + t
			s := shapes[mod+".weight"]
			ps = append(ps, loraParam{module: mod, out: s[0], in: s[1]})
		}
	}
	return ps
}

// LoRA returns the attached adapter's configuration, or nil.
func (m *Model) LoRA() *LoRAConfig { return m.lora }

// AddLoRA attaches a fresh adapter (A uniform in ±1/sqrt(in) from seed, B zero) and freezes the base weights.
func (m *Model) AddLoRA(cfg LoRAConfig, seed uint64) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := checkTokenIndices(cfg.TrainableTokenIndices, m.Config.VocabSize); err != nil {
		return err
	}
	if m.lora != nil {
		return fmt.Errorf("lora: the model already has an adapter")
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6f7261)) // "lora"
	for _, p := range m.loraParams(&cfg) {
		a := make([]float32, cfg.R*p.in)
		bound := 1 / math.Sqrt(float64(p.in))
		for i := range a {
			a[i] = float32((2*rng.Float64() - 1) * bound)
		}
		m.setLoRA(p, cfg, a, make([]float32, p.out*cfg.R))
	}
	if err := m.initTokenRows(cfg.TrainableTokenIndices); err != nil {
		return err
	}
	return m.attachLoRA(cfg)
}

func (m *Model) setLoRA(p loraParam, cfg LoRAConfig, a, b []float32) {
	set := func(name string, data []float32, shape ...int) {
		scope, vname := scopeOf(name)
		m.Ctx.InAbsPath(scope).Checked(false).VariableWithValue(vname, tensors.FromFlatDataAndDimensions(data, shape...))
	}
	set(p.module+".lora_A.weight", a, cfg.R, p.in)
	set(p.module+".lora_B.weight", b, p.out, cfg.R)
	scope, _ := scopeOf(p.module + ".weight")
	m.Ctx.InAbsPath(scope).Checked(false).VariableWithValue("lora_scaling", float32(cfg.Alpha/float64(cfg.R))).SetTrainable(false)
}

// attachLoRA records the adapter and freezes every base parameter (stored in bfloat16 from then on with bf16).
func (m *Model) attachLoRA(cfg LoRAConfig) error {
	c := cfg
	m.lora = &c
	m.Ctx.InAbsPath(context.RootScope).SetParam(loraDropoutParam, c.Dropout)
	m.setBaseTrainable(false)
	m.resetExecs()
	if err := m.storeWeights(); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	return nil
}

// loraDropoutParam is the context parameter (at the root scope) holding the attached adapter's lora_dropout.
const loraDropoutParam = "lora_dropout"

// SeedDropout sets the random state that the adapter's dropout draws its masks from, from the run's seed and the
// optimizer step about to run: a step's masks depend on nothing else, so a run resumed at that step draws the
// masks an uninterrupted run draws. Within the step the state advances with each training graph call (each
// micro-batch). Without an adapter, or with lora_dropout 0, it does nothing.
func (m *Model) SeedDropout(seed int64, step int) error {
	if m.lora == nil || m.lora.Dropout == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(uint64(seed), uint64(step)^0x64726f706f7574)) // "dropout"
	if err := m.Ctx.SetRNGStateFromSeed(int64(r.Uint64())); err != nil {
		return fmt.Errorf("lora dropout: %w", err)
	}
	return nil
}

func (m *Model) setBaseTrainable(trainable bool) {
	for _, p := range m.Config.params() {
		scope, name := scopeOf(p.name)
		if v := m.Ctx.GetVariableByScopeAndName(scope, name); v != nil {
			v.SetTrainable(trainable)
		}
	}
}

// loraDelta is the adapter's term (dropout(x) A^T B^T) * scaling for the linear layer of ctx, or nil when it has
// none. Dropout applies only in a training graph with lora_dropout > 0.
func loraDelta(ctx *context.Context, x *Node) *Node {
	a := ctx.GetVariableByScopeAndName(ctx.In("lora_A").Scope(), "weight")
	if a == nil {
		return nil
	}
	g := x.Graph()
	var h *Node
	p := context.GetParamOr(ctx, loraDropoutParam, 0.0)
	switch {
	case p > 0 && ctx.IsTraining(g) && checkpointing(ctx):
		h = droppedOutProduct(ctx, x, a.ValueGraph(g), p)
	default:
		if p > 0 && ctx.IsTraining(g) {
			// As torch's dropout: keep with probability 1-p, scale the kept values by 1/(1-p).
			keep := GreaterOrEqual(ctx.RandomUniform(g, x.Shape()), Scalar(g, x.DType(), p))
			x = Where(keep, MulScalar(x, 1/(1-p)), ZerosLike(x))
		}
		h = DotGeneral(x, []int{x.Rank() - 1}, nil, a.ValueGraph(g), []int{1}, nil) // [..., r]
	}
	b := variableNode(ctx.In("lora_B"), g, "weight")
	h = DotGeneral(h, []int{h.Rank() - 1}, nil, b, []int{1}, nil) // [..., out]
	return Mul(h, variableNode(ctx, g, "lora_scaling"))
}

// droppedOutProduct is loraDelta's dropout(x) · Aᵀ [..., r] for a training graph with gradient_checkpointing (a
// the value of lora_A.weight [r, in], p the dropout probability), the same values as loraDelta's other branch
// from the same random state, with gradients computed in the backward pass from a mask drawn again: the random
// state the forward pass drew from, taken as a value of the backward pass (inBackward), gives the same bits. So
// neither the dropped-out input (A's gradient reads it) nor the mask (x's gradient reads it) is kept from the
// forward pass to the backward, where XLA kept both, the mask as the 32-bit random numbers it came from: per
// targeted module and layer 8·in bytes a token (for SmolLM2 with LoRA on all seven projections at 8 x 512 tokens,
// 4.6 GiB over its 30 layers). What the recomputation reads, x, is kept instead, or the tensors it is made of,
// which the layer keeps anyway but for o_proj's input. x's and A's gradients are formed as GoMLX differentiates
// loraDelta's other branch (its Where and Mul, and the DotGeneral gradient of internal/kernels), so they are the
// same bit for bit (TestRecomputeExact).
//
// The product reads x stopped and A through a custom identity whose gradient is the recomputed one (the
// product's own gradient for A, which reads the forward's dropped-out input, is then used by nothing); x's
// gradient comes from a custom identity of x tied to the output by an exactly-zero link, the row sums of
// (x' - x), and both read the gradient arriving at the output, which a custom identity on it records (created
// last, it is visited first).
func droppedOutProduct(ctx *context.Context, x, a *Node, p float64) *Node {
	g := x.Graph()
	// ctx.RandomUniform, with the state it draws from at hand.
	stateVar := ctx.GetVariableByScopeAndName(context.RootScope, context.RNGStateVariableName)
	if stateVar == nil || !stateVar.HasValue() {
		if err := ctx.ResetRNGState(); err != nil {
			panic(err)
		}
		stateVar = ctx.GetVariableByScopeAndName(context.RootScope, context.RNGStateVariableName)
	}
	state := stateVar.ValueGraph(g)
	next, uniform := RandomUniform(state, x.Shape())
	stateVar.SetValueGraph(next)
	scale := 1 / (1 - p)
	mask := func(uniform *Node) *Node { return GreaterOrEqual(uniform, Scalar(g, x.DType(), p)) }
	xs := StopGradient(x)
	dropped := Where(mask(uniform), MulScalar(xs, scale), ZerosLike(xs))
	last := x.Rank() - 1
	var outGrad, keep, droppedBack *Node
	redraw := func() { // the mask and the dropped-out input again, in the backward pass
		if outGrad == nil {
			panic("model: a LoRA branch's dropout gradients need its output's, which GoMLX did not visit first")
		}
		if keep == nil {
			sum := ReduceAllSum(outGrad)
			_, uniform := RandomUniform(inBackward(StopGradient(state), sum), x.Shape())
			keep = mask(uniform)
			droppedBack = Where(keep, MulScalar(inBackward(xs, sum), scale), ZerosLike(xs))
		}
	}
	ac := IdentityWithCustomGradient(a, func(_, _ *Node) *Node {
		redraw()
		cross := make([]int, last)
		for i := range cross {
			cross[i] = i
		}
		return DotGeneral(outGrad, cross, nil, droppedBack, cross, nil) // [r, in]
	})
	xc := IdentityWithCustomGradient(x, func(_, _ *Node) *Node {
		redraw()
		d := DotGeneral(outGrad, []int{last}, nil, StopGradient(a), []int{0}, nil) // the dropped-out input's gradient
		return Mul(Where(keep, d, ZerosLike(d)), BroadcastToShape(Scalar(g, x.DType(), scale), d.Shape()))
	})
	h := DotGeneral(dropped, []int{last}, nil, ac, []int{1}, nil) // [..., r]
	h = Add(h, ReduceAndKeep(Sub(xc, xs), ReduceSum, -1))
	return IdentityWithCustomGradient(h, func(_, v *Node) *Node {
		outGrad = v
		return v
	})
}

// peftPrefix is what peft puts before the base model's tensor names in adapter_model.safetensors.
const peftPrefix = "base_model.model."

// SaveAdapter writes the attached adapter as peft does: adapter_config.json and adapter_model.safetensors (float32).
func (m *Model) SaveAdapter(dir string) error {
	if m.lora == nil {
		return fmt.Errorf("save adapter: the model has no LoRA adapter")
	}
	var all []stTensor
	for _, p := range m.loraParams(m.lora) {
		for _, ab := range []string{".lora_A.weight", ".lora_B.weight"} {
			data, shape, err := m.Tensor(p.module + ab)
			if err != nil {
				return fmt.Errorf("save adapter: %w", err)
			}
			all = append(all, stTensor{name: peftPrefix + p.module + ab, shape: shape, data: data})
		}
	}
	var tokenIDs any // peft writes null without trainable tokens
	if ids := m.lora.TrainableTokenIndices; len(ids) > 0 {
		data, shape, err := m.Tensor(tokenAdapterTensor)
		if err != nil {
			return fmt.Errorf("save adapter: %w", err)
		}
		all = append(all, stTensor{name: peftPrefix + tokenAdapterTensor, shape: shape, data: data})
		tokenIDs = ids
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	cfg := map[string]any{
		"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": m.lora.R, "lora_alpha": m.lora.Alpha,
		"lora_dropout": m.lora.Dropout, "target_modules": m.lora.targets(), "bias": "none",
		"fan_in_fan_out": false, "inference_mode": true, "init_lora_weights": true, "use_rslora": false,
		"use_dora": false, "modules_to_save": nil, "layers_to_transform": nil, "layers_pattern": nil,
		"rank_pattern": map[string]any{}, "alpha_pattern": map[string]any{}, "base_model_name_or_path": nil,
		"revision": nil, "trainable_token_indices": tokenIDs,
	}
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	return writeSafetensors(filepath.Join(dir, "adapter_model.safetensors"), all, "F32")
}

// LoadAdapter attaches the peft LoRA adapter in dir (adapter_config.json, adapter_model.safetensors) and freezes
// the base weights. It refuses what it does not implement (DoRA, rsLoRA, per-module ranks, bias training,
// modules_to_save, fan_in_fan_out) and a tensor of the wrong shape, naming them.
func (m *Model) LoadAdapter(dir string) error {
	if m.lora != nil {
		return fmt.Errorf("load adapter %s: the model already has an adapter", dir)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		return fmt.Errorf("load adapter: %w", err)
	}
	var pc struct {
		LoRAConfig
		PeftType      string          `json:"peft_type"`
		TargetModules json.RawMessage `json:"target_modules"`
		Bias          string          `json:"bias"`
		UseDoRA       bool            `json:"use_dora"`
		UseRSLoRA     bool            `json:"use_rslora"`
		FanInFanOut   bool            `json:"fan_in_fan_out"`
		ModulesToSave []string        `json:"modules_to_save"`
		RankPattern   map[string]any  `json:"rank_pattern"`
		AlphaPattern  map[string]any  `json:"alpha_pattern"`
		Layers        json.RawMessage `json:"layers_to_transform"`
		TokenIDs      json.RawMessage `json:"trainable_token_indices"`
	}
	if err := json.Unmarshal(raw, &pc); err != nil {
		return fmt.Errorf("load adapter %s: adapter_config.json: %w", dir, err)
	}
	cfg := pc.LoRAConfig // lora_dropout included: it acts when the loaded adapter trains on, as peft's is_trainable
	// target_modules is a list or one module name (peft also allows a regex, refused below).
	if err := json.Unmarshal(pc.TargetModules, &cfg.TargetModules); err != nil {
		var one string
		if json.Unmarshal(pc.TargetModules, &one) != nil {
			return fmt.Errorf("load adapter %s: target_modules %s", dir, pc.TargetModules)
		}
		cfg.TargetModules = []string{one}
	}
	switch {
	case pc.PeftType != "LORA":
		return fmt.Errorf("load adapter %s: peft_type %q is not LORA", dir, pc.PeftType)
	case pc.UseDoRA || pc.UseRSLoRA || pc.FanInFanOut:
		return fmt.Errorf("load adapter %s: use_dora, use_rslora and fan_in_fan_out are not supported", dir)
	case pc.Bias != "" && pc.Bias != "none":
		return fmt.Errorf("load adapter %s: bias %q is not supported (none)", dir, pc.Bias)
	case len(pc.ModulesToSave) > 0 || len(pc.RankPattern) > 0 || len(pc.AlphaPattern) > 0:
		return fmt.Errorf("load adapter %s: modules_to_save, rank_pattern and alpha_pattern are not supported", dir)
	case len(pc.Layers) > 0 && string(pc.Layers) != "null":
		return fmt.Errorf("load adapter %s: layers_to_transform is not supported", dir)
	}
	if cfg.TrainableTokenIndices, err = parseTokenIndices(pc.TokenIDs); err != nil {
		return fmt.Errorf("load adapter %s: %w", dir, err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("load adapter %s: %w", dir, err)
	}
	if err := checkTokenIndices(cfg.TrainableTokenIndices, m.Config.VocabSize); err != nil {
		return fmt.Errorf("load adapter %s: %w", dir, err)
	}
	st, err := openSafetensors(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		return fmt.Errorf("load adapter: %w", err)
	}
	defer st.Close()
	params := m.loraParams(&cfg)
	type ab struct{ a, b []float32 }
	loaded := make([]ab, len(params))
	for i, p := range params {
		if loaded[i].a, err = st.readF32(peftPrefix+p.module+".lora_A.weight", []int{cfg.R, p.in}); err != nil {
			return fmt.Errorf("load adapter %s: %w", dir, err)
		}
		if loaded[i].b, err = st.readF32(peftPrefix+p.module+".lora_B.weight", []int{p.out, cfg.R}); err != nil {
			return fmt.Errorf("load adapter %s: %w", dir, err)
		}
	}
	want := 2 * len(params)
	var tokenRows []float32
	if n := len(cfg.TrainableTokenIndices); n > 0 {
		want++
		if tokenRows, err = st.readF32(peftPrefix+tokenAdapterTensor, []int{n, m.Config.HiddenSize}); err != nil {
			return fmt.Errorf("load adapter %s: %w", dir, err)
		}
	}
	if n := len(st.entries); n != want {
		return fmt.Errorf("load adapter %s: %d tensors, want %d for %v on %d layers and %d trainable tokens", dir, n, want, cfg.targets(), m.Config.NumHiddenLayers, len(cfg.TrainableTokenIndices))
	}
	for i, p := range params {
		m.setLoRA(p, cfg, loaded[i].a, loaded[i].b)
	}
	if tokenRows != nil {
		if err := m.setTokenRows(tokenRows, len(cfg.TrainableTokenIndices)); err != nil {
			return fmt.Errorf("load adapter %s: %w", dir, err)
		}
	}
	return m.attachLoRA(cfg)
}

// MergeAdapter is Merge after loading the peft adapter directory adapterDir ("": merge the adapter the model
// already has, such as the adapter/ that training writes beside final/). It returns the merged adapter's
// configuration (rank, alpha, target modules, trainable token rows), and an error when there is none.
func (m *Model) MergeAdapter(adapterDir string) (*LoRAConfig, error) {
	if adapterDir != "" {
		if err := m.LoadAdapter(adapterDir); err != nil {
			return nil, err
		}
	}
	lc := m.lora
	if lc == nil {
		return nil, errors.New("merge: the model has no LoRA adapter (load one, or give the adapter directory)")
	}
	return lc, m.Merge()
}

// Merge folds the adapter into the base weights (W += B A * alpha / r, in float64 then rounded), removes it and
// makes the base weights trainable again (float32, also with bf16): the model then saves as an ordinary checkpoint.
func (m *Model) Merge() error {
	if m.lora == nil {
		return fmt.Errorf("merge: the model has no LoRA adapter")
	}
	if err := m.mergeTokenRows(); err != nil {
		return err
	}
	scale := m.lora.Alpha / float64(m.lora.R)
	r := m.lora.R
	for _, p := range m.loraParams(m.lora) {
		w, _, err := m.Tensor(p.module + ".weight")
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		a, _, err := m.Tensor(p.module + ".lora_A.weight")
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		b, _, err := m.Tensor(p.module + ".lora_B.weight")
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		for o := range p.out {
			for i := range p.in {
				s := 0.0
				for k := range r {
					s += float64(b[o*r+k]) * float64(a[k*p.in+i])
				}
				w[o*p.in+i] = float32(float64(w[o*p.in+i]) + s*scale)
			}
		}
		scope, name := scopeOf(p.module + ".weight")
		if err := m.Ctx.GetVariableByScopeAndName(scope, name).SetValue(tensors.FromFlatDataAndDimensions(w, p.out, p.in)); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		for _, v := range []string{".lora_A.weight", ".lora_B.weight", ".lora_scaling"} {
			scope, name := scopeOf(p.module + v)
			if err := m.Ctx.DeleteVariable(scope, name); err != nil {
				return fmt.Errorf("merge: %w", err)
			}
		}
	}
	m.lora = nil
	m.Ctx.InAbsPath(context.RootScope).SetParam(loraDropoutParam, 0.0)
	m.setBaseTrainable(true)
	m.resetExecs()
	if err := m.storeWeights(); err != nil { // trainable again: float32 (SetBF16)
		return fmt.Errorf("merge: %w", err)
	}
	return nil
}
