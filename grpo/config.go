package grpo

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/runlog"
)

// Loss types (GRPOConfig.loss_type) that this package implements.
const (
	LossGRPO   = "grpo"
	LossBNPO   = "bnpo"
	LossDrGRPO = "dr_grpo"
	LossDAPO   = "dapo"
)

// Importance-sampling correction modes (GRPOConfig.vllm_importance_sampling_mode).
const (
	ISTokenTruncate    = "token_truncate"
	ISTokenMask        = "token_mask"
	ISSequenceTruncate = "sequence_truncate"
	ISSequenceMask     = "sequence_mask"
)

// Importance-sampling levels (GRPOConfig.importance_sampling_level).
const (
	LevelToken    = "token"
	LevelSequence = "sequence"
)

// Learning-rate scheduler types (TrainingArguments.lr_scheduler_type) that this package implements.
const (
	SchedulerLinear              = "linear"
	SchedulerCosine              = "cosine"
	SchedulerConstant            = "constant"
	SchedulerConstantWithWarmup  = "constant_with_warmup"
	defaultDynamicSamplingRounds = 3
)

// ScaleRewards is GRPOConfig.scale_rewards: "group" (default), "batch" or "none". As in TRL,
// YAML true means "group" and false means "none".
type ScaleRewards string

// The scale_rewards values.
const (
	ScaleGroup ScaleRewards = "group"
	ScaleBatch ScaleRewards = "batch"
	ScaleNone  ScaleRewards = "none"
)

// UnmarshalYAML accepts "group", "batch", "none", true (= "group") and false (= "none").
func (s *ScaleRewards) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: scale_rewards must be \"group\", \"batch\", \"none\", true or false", n.Line)
	}
	if n.Tag == "!!bool" {
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("line %d: scale_rewards: %w", n.Line, err)
		}
		if b {
			*s = ScaleGroup
		} else {
			*s = ScaleNone
		}
		return nil
	}
	switch v := ScaleRewards(n.Value); v {
	case ScaleGroup, ScaleBatch, ScaleNone:
		*s = v
		return nil
	}
	return fmt.Errorf("line %d: scale_rewards %q: must be \"group\", \"batch\", \"none\", true or false", n.Line, n.Value)
}

// RewardSpec names one reward function and its weight (TRL's reward_funcs with reward_weights).
type RewardSpec struct {
	Name   string  `yaml:"name"`
	Weight float64 `yaml:"weight"`
}

// UnmarshalYAML defaults the weight to 1.0 (TRL's default reward_weights) and rejects unknown keys.
func (r *RewardSpec) UnmarshalYAML(n *yaml.Node) error {
	type plain RewardSpec
	p := plain{Weight: 1}
	if err := n.Decode(&p); err != nil {
		return err
	}
	*r = RewardSpec(p)
	return nil
}

// Config is TRL's GRPOConfig (with the transformers TrainingArguments fields it inherits) restricted to
// the knobs mcprl implements, plus mcprl's own keys (model, tasks, fixtures, dsn, rewards,
// dynamic_sampling). Field names in YAML are TRL's. Use Default for TRL's defaults, then Load or Parse.
type Config struct {
	// Where checkpoints, metrics.jsonl and the final model go.
	OutputDir string `yaml:"output_dir"`

	// TrainingArguments (TRL overrides: learning_rate 1e-6, logging_steps 10).
	LearningRate              float64 `yaml:"learning_rate"`
	NumTrainEpochs            float64 `yaml:"num_train_epochs"`
	MaxSteps                  int     `yaml:"max_steps"` // > 0 overrides num_train_epochs
	PerDeviceTrainBatchSize   int     `yaml:"per_device_train_batch_size"`
	GradientAccumulationSteps int     `yaml:"gradient_accumulation_steps"`
	LoggingSteps              float64 `yaml:"logging_steps"` // < 1: a ratio of the total steps
	SaveSteps                 float64 `yaml:"save_steps"`    // < 1: a ratio of the total steps
	SaveTotalLimit            *int    `yaml:"save_total_limit"`
	Seed                      int64   `yaml:"seed"`
	LRSchedulerType           string  `yaml:"lr_scheduler_type"`
	WarmupRatio               float64 `yaml:"warmup_ratio"`
	WarmupSteps               float64 `yaml:"warmup_steps"` // >= 1: steps, overriding warmup_ratio; in (0, 1): a ratio (transformers v5)
	WeightDecay               float64 `yaml:"weight_decay"`
	AdamBeta1                 float64 `yaml:"adam_beta1"`
	AdamBeta2                 float64 `yaml:"adam_beta2"`
	AdamEpsilon               float64 `yaml:"adam_epsilon"`
	MaxGradNorm               float64 `yaml:"max_grad_norm"` // 0 disables clipping
	// ReportTo names where logs go besides metrics.jsonl: "tensorboard" (event files in LoggingDir) or
	// "none" (the default).
	ReportTo   runlog.ReportTo `yaml:"report_to"`
	LoggingDir string          `yaml:"logging_dir"` // "": OUTPUT_DIR/runs/MonDD_HH-MM-SS_HOST

	// GRPOConfig: data and generation.
	NumGenerations           int     `yaml:"num_generations"`
	MaxPromptLength          int     `yaml:"max_prompt_length"` // 0: no limit (TRL <= 0.25 defaulted to 512)
	MaxCompletionLength      int     `yaml:"max_completion_length"`
	GenerationBatchSize      *int    `yaml:"generation_batch_size"`
	StepsPerGeneration       *int    `yaml:"steps_per_generation"`
	ShuffleDataset           bool    `yaml:"shuffle_dataset"`
	Temperature              float64 `yaml:"temperature"`
	TopP                     float64 `yaml:"top_p"`
	TopK                     int     `yaml:"top_k"` // 0 disables top-k filtering
	MaxToolCallingIterations *int    `yaml:"max_tool_calling_iterations"`

	// GRPOConfig: training.
	Beta float64 `yaml:"beta"`
	// UseBiasCorrectionKL multiplies the per-token KL by the importance ratio (TRL's default since 2026: the
	// unbiased reverse-KL gradient of DeepSeek-V3.2); it matters only when beta != 0.
	UseBiasCorrectionKL      bool         `yaml:"use_bias_correction_kl"`
	NumIterations            int          `yaml:"num_iterations"`
	Epsilon                  float64      `yaml:"epsilon"`
	EpsilonHigh              *float64     `yaml:"epsilon_high"` // nil: same as epsilon
	ImportanceSamplingLevel  string       `yaml:"importance_sampling_level"`
	ScaleRewards             ScaleRewards `yaml:"scale_rewards"`
	LossType                 string       `yaml:"loss_type"`
	MaskTruncatedCompletions bool         `yaml:"mask_truncated_completions"`

	// GRPOConfig: importance-sampling correction for the gap between the sampler's log-probs and the
	// trainer's recomputed ones. TRL applies it to vLLM's samples; mcprl to every sampler, since every
	// sampler reports its log-probs. ClipMin and ClipMax are nil when unset (YAML null, TRL's None).
	VLLMImportanceSamplingCorrection bool     `yaml:"vllm_importance_sampling_correction"`
	VLLMImportanceSamplingMode       string   `yaml:"vllm_importance_sampling_mode"`
	VLLMImportanceSamplingClipMax    *float64 `yaml:"vllm_importance_sampling_clip_max"`
	VLLMImportanceSamplingClipMin    *float64 `yaml:"vllm_importance_sampling_clip_min"`
	// VLLMImportanceSamplingCap is TRL's deprecated name for the clip max; when set it replaces it.
	VLLMImportanceSamplingCap *float64 `yaml:"vllm_importance_sampling_cap"`

	// mcprl's own keys.
	Model    string       `yaml:"model"`    // model directory (HF layout)
	Tasks    string       `yaml:"tasks"`    // tasks JSONL
	Fixtures string       `yaml:"fixtures"` // fixtures directory
	DSN      string       `yaml:"dsn"`      // PostgreSQL DSN for sandboxes; "" = embedded SQLite
	Rewards  []RewardSpec `yaml:"rewards"`
	// DynamicSampling drops groups whose rewards all agree (zero std) and generates more groups to
	// refill the batch, as DAPO/verl's filter_groups; TRL has no such option.
	DynamicSampling bool `yaml:"dynamic_sampling"`
	// DynamicSamplingMaxRounds bounds the generation rounds per step when refilling (0: no bound).
	DynamicSamplingMaxRounds int `yaml:"dynamic_sampling_max_rounds"`

	// LoRA (TRL ModelConfig's names): with use_peft the policy trains a peft LoRA adapter on frozen base weights
	// (model/lora.go). lora_dropout must be 0 (TRL's default is 0.05; dropout is not implemented).
	UsePeft           bool     `yaml:"use_peft"`
	LoraR             int      `yaml:"lora_r"`
	LoraAlpha         float64  `yaml:"lora_alpha"`
	LoraDropout       float64  `yaml:"lora_dropout"`
	LoraTargetModules []string `yaml:"lora_target_modules"`

	// Ignored lists the TRL keys found in the file that change nothing in mcprl (logging destinations,
	// PyTorch precision and memory switches), as "key (line N)"; the CLI should mention them.
	Ignored []string `yaml:"-"`
}

// trlNoEffect are TRL GRPOConfig / transformers TrainingArguments options that do not change what
// mcprl computes: they are accepted (so a TRL config loads) and listed in Config.Ignored.
var trlNoEffect = setOf("run_name", "disable_tqdm", "logging_strategy", "save_strategy",
	"logging_first_step", "log_completions", "num_completions_to_print", "log_unique_prompts", "log_multimodal",
	"remove_unused_columns", "gradient_checkpointing", "bf16", "fp16", "tf32", "dataloader_num_workers",
	"ddp_find_unused_parameters", "overwrite_output_dir", "use_liger_kernel", "torch_empty_cache_steps",
	"ds3_gather_for_generation", "trust_remote_code", "model_init_kwargs", "push_to_hub", "hub_model_id",
	"save_only_model", "disable_dropout")

// trlUnsupported are TRL GRPOConfig options that would change the computation but mcprl does not
// implement: naming one is an error that says so.
var trlUnsupported = setOf("cache_implementation", "cast_lm_head_to_fp32", "chat_template_kwargs", "delta",
	"entropy_coef", "entropy_coef_delta", "entropy_coef_max", "entropy_coef_min", "entropy_target",
	"generation_kwargs", "min_p", "multi_objective_aggregation", "num_generations_eval", "off_policy_mask_threshold",
	"pad_to_multiple_of", "ref_model_mixup_alpha", "ref_model_sync_steps", "repetition_penalty", "reward_weights",
	"router_aux_loss_coef", "sapo_temperature_neg", "sapo_temperature_pos", "sync_ref_model", "top_entropy_quantile",
	"use_adaptive_entropy", "use_vllm", "vespo_k_neg", "vespo_k_pos", "vespo_lambda_neg",
	"vespo_lambda_pos", "lr_scheduler_kwargs", "optim", "eval_strategy", "eval_steps", "per_device_eval_batch_size",
	"gradient_checkpointing_kwargs", "resume_from_checkpoint")

func setOf(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// fileType is Config inlined with one field per no-effect key, so that yaml.v3's KnownFields decoding
// accepts exactly Config's keys and those.
var fileType = func() reflect.Type {
	fields := []reflect.StructField{{Name: "Config", Type: reflect.TypeOf(Config{}), Tag: `yaml:",inline"`}}
	keys := make([]string, 0, len(trlNoEffect))
	for k := range trlNoEffect {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("Ignored%d", i), Type: reflect.TypeOf(yaml.Node{}), Tag: reflect.StructTag(`yaml:"` + k + `"`),
		})
	}
	return reflect.StructOf(fields)
}()

// ignoredKeys lists the top-level no-effect keys of a parsed file with their lines.
func ignoredKeys(root *yaml.Node) []string {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	var out []string
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; trlNoEffect[k.Value] {
			out = append(out, fmt.Sprintf("%s (line %d)", k.Value, k.Line))
		}
	}
	return out
}

// Default returns TRL's GRPOConfig defaults (TRL 2026-07 with transformers' TrainingArguments).
func Default() Config {
	return Config{
		OutputDir:                 "trainer_output",
		LearningRate:              1e-6,
		NumTrainEpochs:            3,
		MaxSteps:                  -1,
		PerDeviceTrainBatchSize:   8,
		GradientAccumulationSteps: 1,
		LoggingSteps:              10,
		SaveSteps:                 500,
		Seed:                      42,
		LRSchedulerType:           SchedulerLinear,
		AdamBeta1:                 0.9,
		AdamBeta2:                 0.999,
		AdamEpsilon:               1e-8,
		MaxGradNorm:               1.0,
		NumGenerations:            8,
		MaxCompletionLength:       512,
		ShuffleDataset:            true,
		Temperature:               1.0,
		TopP:                      1.0,
		NumIterations:             1,
		UseBiasCorrectionKL:       true,
		Epsilon:                   0.2,
		ImportanceSamplingLevel:   LevelToken,
		ScaleRewards:              ScaleGroup,
		LossType:                  LossDAPO,
		DynamicSamplingMaxRounds:  defaultDynamicSamplingRounds,
		LoraR:                     16,
		LoraAlpha:                 32,
		LoraTargetModules:         []string{"q_proj", "v_proj"}, // peft's default for Llama and Qwen2

		VLLMImportanceSamplingCorrection: true,
		VLLMImportanceSamplingMode:       ISSequenceMask,
		VLLMImportanceSamplingClipMax:    ptr(3.0),
	}
}

func ptr[T any](v T) *T { return &v }

// LoRA returns the adapter configuration of use_peft's lora_* keys.
func (c *Config) LoRA() model.LoRAConfig {
	return model.LoRAConfig{R: c.LoraR, Alpha: c.LoraAlpha, Dropout: c.LoraDropout, TargetModules: c.LoraTargetModules}
}

// Load reads a YAML config file over TRL's defaults and validates it.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, path)
}

// Parse reads YAML config data over TRL's defaults and validates it. name labels errors (a file name).
// Unknown keys and values of the wrong type are errors naming the key and its line ("name:LINE: key ...").
func Parse(data []byte, name string) (*Config, error) {
	cfg := Default()
	keys := map[int]string{} // line -> key path, to name the key in errors
	if len(bytes.TrimSpace(data)) > 0 {
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, decodeError(err, name, keys)
		}
		if errs := checkKeys(&root, reflect.TypeOf(cfg), "", keys, name); len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		// Decode with KnownFields into Config plus the no-effect TRL keys (captured, then dropped).
		file := reflect.New(fileType)
		file.Elem().Field(0).Set(reflect.ValueOf(cfg))
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(file.Interface()); err != nil {
			return nil, decodeError(err, name, keys)
		}
		cfg = file.Elem().Field(0).Interface().(Config)
		cfg.Ignored = ignoredKeys(&root)
	}
	if cfg.VLLMImportanceSamplingCap != nil {
		// TRL's __post_init__: the deprecated cap is the clip max.
		cfg.VLLMImportanceSamplingClipMax = ptr(*cfg.VLLMImportanceSamplingCap)
	}
	if err := cfg.Validate(); err != nil {
		lines := map[string]int{}
		for line, key := range keys {
			if l, ok := lines[key]; !ok || line < l {
				lines[key] = line
			}
		}
		var out []error
		for _, e := range unjoin(err) {
			var ve *ValueError
			if errors.As(e, &ve) {
				if l, ok := lines[ve.Key]; ok {
					ve.Line = l
					out = append(out, fmt.Errorf("%s:%d: %w", name, l, ve))
					continue
				}
			}
			out = append(out, fmt.Errorf("%s: %w", name, e))
		}
		return nil, errors.Join(out...)
	}
	return &cfg, nil
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

var lineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// decodeError rewrites yaml.v3's "line N: msg" errors as "name:N: key: msg".
func decodeError(err error, name string, keys map[int]string) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, 0, len(msgs))
	for _, m := range msgs {
		if sub := lineRE.FindStringSubmatch(m); sub != nil {
			line, _ := strconv.Atoi(sub[1])
			if k, ok := keys[line]; ok && !strings.Contains(sub[2], k) {
				errs = append(errs, fmt.Errorf("%s:%d: %s: %s", name, line, k, sub[2]))
				continue
			}
			errs = append(errs, fmt.Errorf("%s:%d: %s", name, line, sub[2]))
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %s", name, m))
	}
	return errors.Join(errs...)
}

// checkKeys reports every mapping key the struct type t does not know, by line, with a suggestion,
// and records the key path of each value's line in keys.
func checkKeys(n *yaml.Node, t reflect.Type, path string, keys map[int]string, name string) []error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode {
			var errs []error
			for i, item := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if _, ok := keys[item.Line]; !ok {
					keys[item.Line] = p
				}
				errs = append(errs, checkKeys(item, t.Elem(), p, keys, name)...)
			}
			return errs
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
		return nil
	}
	known := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key != "" && key != "-" {
			known[key] = f.Type
		}
	}
	var errs []error
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		ft, ok := known[k.Value]
		if !ok && path == "" && trlNoEffect[k.Value] {
			continue
		}
		if !ok && path == "" && trlUnsupported[k.Value] {
			errs = append(errs, fmt.Errorf("%s:%d: %q is a TRL GRPOConfig option that mcprl does not implement; remove it", name, k.Line, p))
			continue
		}
		if !ok {
			msg := fmt.Sprintf("%s:%d: unknown key %q", name, k.Line, p)
			if s := closest(k.Value, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			errs = append(errs, errors.New(msg))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: key %q repeated (first on line %d)", name, k.Line, p, first))
		} else {
			seen[k.Value] = k.Line
		}
		keys[v.Line] = p
		errs = append(errs, checkKeys(v, ft, p, keys, name)...)
	}
	return errs
}

// closest returns the known key nearest to s by edit distance, or "" when none is near.
func closest(s string, known map[string]reflect.Type) string {
	keys := make([]string, 0, len(known))
	for k := range known {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best, bestD := "", len(s)/2+2
	for _, k := range keys {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// EffectiveEpsilonHigh is epsilon_high, or epsilon when it is unset (TRL's rule).
func (c *Config) EffectiveEpsilonHigh() float64 {
	if c.EpsilonHigh != nil {
		return *c.EpsilonHigh
	}
	return c.Epsilon
}

// Generation returns TRL's derived (generation_batch_size, steps_per_generation) for one process:
// both default from per_device_train_batch_size and gradient_accumulation_steps.
func (c *Config) Generation() (generationBatchSize, stepsPerGeneration int, err error) {
	b := c.PerDeviceTrainBatchSize
	switch {
	case c.GenerationBatchSize == nil && c.StepsPerGeneration == nil:
		return b * c.GradientAccumulationSteps, c.GradientAccumulationSteps, nil
	case c.GenerationBatchSize != nil && c.StepsPerGeneration == nil:
		g := *c.GenerationBatchSize
		if b <= 0 || g%b != 0 {
			return 0, 0, fmt.Errorf("generation_batch_size (%d) must be divisible by per_device_train_batch_size (%d)", g, b)
		}
		return g, g / b, nil
	case c.GenerationBatchSize == nil && c.StepsPerGeneration != nil:
		return b * *c.StepsPerGeneration, *c.StepsPerGeneration, nil
	default:
		return 0, 0, errors.New("generation_batch_size and steps_per_generation cannot both be set")
	}
}

// RewardWeights returns the reward weights in the order of Rewards (1.0 where unset).
func (c *Config) RewardWeights() []float64 {
	w := make([]float64, len(c.Rewards))
	for i, r := range c.Rewards {
		w[i] = r.Weight
	}
	return w
}

// ValueError is one invalid value found by Validate: Key is the YAML key (rewards[i] for a reward),
// Line its line when the config came from YAML (0 otherwise).
type ValueError struct {
	Key  string
	Line int
	Msg  string
}

func (e *ValueError) Error() string { return e.Msg }

// Validate checks the values the way TRL's __post_init__ and the trainer do, and reports all problems.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		if strings.Contains(key, "%d") {
			key = fmt.Sprintf(key, args[0])
		}
		errs = append(errs, &ValueError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	finite := func(name string, v float64) bool {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, &ValueError{Key: name, Msg: fmt.Sprintf("%s must be a finite number, got %v", name, v)})
			return false
		}
		return true
	}
	if err := runlog.CheckReportTo(c.ReportTo); err != nil {
		bad("report_to", "%v", err)
	}
	if c.OutputDir == "" {
		bad("output_dir", "output_dir must not be empty")
	}
	if c.UsePeft {
		lc := c.LoRA()
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
			bad(key, "%v", err)
		}
	}
	if finite("learning_rate", c.LearningRate) && c.LearningRate < 0 {
		bad("learning_rate", "learning_rate must be >= 0, got %g", c.LearningRate)
	}
	if finite("num_train_epochs", c.NumTrainEpochs) && c.MaxSteps <= 0 && c.NumTrainEpochs <= 0 {
		bad("num_train_epochs", "num_train_epochs must be > 0 when max_steps is not set, got %g", c.NumTrainEpochs)
	}
	if c.PerDeviceTrainBatchSize < 1 {
		bad("per_device_train_batch_size", "per_device_train_batch_size must be >= 1, got %d", c.PerDeviceTrainBatchSize)
	}
	if c.GradientAccumulationSteps < 1 {
		bad("gradient_accumulation_steps", "gradient_accumulation_steps must be >= 1, got %d", c.GradientAccumulationSteps)
	}
	if finite("logging_steps", c.LoggingSteps) && c.LoggingSteps <= 0 {
		bad("logging_steps", "logging_steps must be > 0, got %g", c.LoggingSteps)
	} else if c.LoggingSteps > 1 && c.LoggingSteps != math.Trunc(c.LoggingSteps) {
		bad("logging_steps", "logging_steps must be an integer or a ratio in (0, 1), got %g", c.LoggingSteps)
	}
	if finite("save_steps", c.SaveSteps) && c.SaveSteps <= 0 {
		bad("save_steps", "save_steps must be > 0, got %g", c.SaveSteps)
	} else if c.SaveSteps > 1 && c.SaveSteps != math.Trunc(c.SaveSteps) {
		bad("save_steps", "save_steps must be an integer or a ratio in (0, 1), got %g", c.SaveSteps)
	}
	if c.SaveTotalLimit != nil && *c.SaveTotalLimit < 1 {
		bad("save_total_limit", "save_total_limit must be >= 1 when set, got %d", *c.SaveTotalLimit)
	}
	switch c.LRSchedulerType {
	case SchedulerLinear, SchedulerCosine, SchedulerConstant, SchedulerConstantWithWarmup:
	default:
		bad("lr_scheduler_type", "lr_scheduler_type %q is not supported (use linear, cosine, constant or constant_with_warmup)", c.LRSchedulerType)
	}
	if finite("warmup_ratio", c.WarmupRatio) && (c.WarmupRatio < 0 || c.WarmupRatio > 1) {
		bad("warmup_ratio", "warmup_ratio must be in [0, 1], got %g", c.WarmupRatio)
	}
	if finite("warmup_steps", c.WarmupSteps) && c.WarmupSteps < 0 {
		bad("warmup_steps", "warmup_steps must be >= 0, got %g", c.WarmupSteps)
	} else if c.WarmupSteps > 1 && c.WarmupSteps != math.Trunc(c.WarmupSteps) {
		bad("warmup_steps", "warmup_steps must be an integer or a ratio in (0, 1), got %g", c.WarmupSteps)
	}
	if finite("weight_decay", c.WeightDecay) && c.WeightDecay < 0 {
		bad("weight_decay", "weight_decay must be >= 0, got %g", c.WeightDecay)
	}
	if finite("adam_beta1", c.AdamBeta1) && (c.AdamBeta1 < 0 || c.AdamBeta1 >= 1) {
		bad("adam_beta1", "adam_beta1 must be in [0, 1), got %g", c.AdamBeta1)
	}
	if finite("adam_beta2", c.AdamBeta2) && (c.AdamBeta2 < 0 || c.AdamBeta2 >= 1) {
		bad("adam_beta2", "adam_beta2 must be in [0, 1), got %g", c.AdamBeta2)
	}
	if finite("adam_epsilon", c.AdamEpsilon) && c.AdamEpsilon <= 0 {
		bad("adam_epsilon", "adam_epsilon must be > 0, got %g", c.AdamEpsilon)
	}
	if finite("max_grad_norm", c.MaxGradNorm) && c.MaxGradNorm < 0 {
		bad("max_grad_norm", "max_grad_norm must be >= 0 (0 disables clipping), got %g", c.MaxGradNorm)
	}
	if c.NumGenerations < 2 {
		bad("num_generations", "num_generations must be at least 2 to compute group advantages, got %d", c.NumGenerations)
	}
	if c.MaxPromptLength < 0 {
		bad("max_prompt_length", "max_prompt_length must be >= 0 (0: no limit), got %d", c.MaxPromptLength)
	}
	if c.MaxCompletionLength < 1 {
		bad("max_completion_length", "max_completion_length must be >= 1, got %d", c.MaxCompletionLength)
	}
	if c.PerDeviceTrainBatchSize >= 1 && c.GradientAccumulationSteps >= 1 && c.NumGenerations >= 2 {
		gbs, _, err := c.Generation()
		if err != nil {
			errs = append(errs, &ValueError{Key: "generation_batch_size", Msg: err.Error()})
		} else if gbs%c.NumGenerations != 0 {
			bad("num_generations", "generation batch size (per_device_train_batch_size %d x steps_per_generation = %d) must be divisible by num_generations (%d)",
				c.PerDeviceTrainBatchSize, gbs, c.NumGenerations)
		}
	}
	if c.StepsPerGeneration != nil && *c.StepsPerGeneration < 1 {
		bad("steps_per_generation", "steps_per_generation must be >= 1, got %d", *c.StepsPerGeneration)
	}
	if finite("temperature", c.Temperature) && c.Temperature <= 0 {
		bad("temperature", "temperature must be > 0, got %g", c.Temperature)
	}
	if finite("top_p", c.TopP) && (c.TopP <= 0 || c.TopP > 1) {
		bad("top_p", "top_p must be in (0, 1], got %g", c.TopP)
	}
	if c.TopK < 0 {
		bad("top_k", "top_k must be >= 0 (0 disables it), got %d", c.TopK)
	}
	if c.MaxToolCallingIterations != nil && *c.MaxToolCallingIterations < 0 {
		bad("max_tool_calling_iterations", "max_tool_calling_iterations must be >= 0, got %d", *c.MaxToolCallingIterations)
	}
	if finite("beta", c.Beta) && c.Beta < 0 {
		bad("beta", "beta must be >= 0, got %g", c.Beta)
	}
	if c.NumIterations < 1 {
		bad("num_iterations", "num_iterations must be >= 1, got %d", c.NumIterations)
	}
	if finite("epsilon", c.Epsilon) && (c.Epsilon < 0 || c.Epsilon >= 1) {
		bad("epsilon", "epsilon must be in [0, 1), got %g", c.Epsilon)
	}
	if c.EpsilonHigh != nil && finite("epsilon_high", *c.EpsilonHigh) && *c.EpsilonHigh < 0 {
		bad("epsilon_high", "epsilon_high must be >= 0, got %g", *c.EpsilonHigh)
	}
	switch c.ImportanceSamplingLevel {
	case LevelToken, LevelSequence:
	default:
		bad("importance_sampling_level", "importance_sampling_level %q: must be \"token\" or \"sequence\"", c.ImportanceSamplingLevel)
	}
	switch c.ScaleRewards {
	case ScaleGroup, ScaleBatch, ScaleNone:
	default:
		bad("scale_rewards", "scale_rewards %q: must be \"group\", \"batch\", \"none\", true or false", c.ScaleRewards)
	}
	switch c.LossType {
	case LossGRPO, LossBNPO, LossDrGRPO, LossDAPO:
	case "cispo", "sapo", "luspo", "vespo":
		bad("loss_type", "loss_type %q is a TRL loss that mcprl does not implement (use grpo, bnpo, dr_grpo or dapo)", c.LossType)
	default:
		bad("loss_type", "loss_type %q: must be one of grpo, bnpo, dr_grpo, dapo", c.LossType)
	}
	switch c.VLLMImportanceSamplingMode {
	case ISTokenTruncate, ISTokenMask, ISSequenceTruncate, ISSequenceMask:
	default:
		bad("vllm_importance_sampling_mode", "vllm_importance_sampling_mode %q: must be token_truncate, token_mask, sequence_truncate or sequence_mask", c.VLLMImportanceSamplingMode)
	}
	lo, hi := c.VLLMImportanceSamplingClipMin, c.VLLMImportanceSamplingClipMax
	if lo != nil && finite("vllm_importance_sampling_clip_min", *lo) && *lo < 0 {
		bad("vllm_importance_sampling_clip_min", "vllm_importance_sampling_clip_min must be >= 0, got %g", *lo)
	}
	if hi != nil && finite("vllm_importance_sampling_clip_max", *hi) && *hi <= 0 {
		bad("vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_max must be > 0, got %g", *hi)
	}
	if lo != nil && hi != nil && *lo >= *hi {
		bad("vllm_importance_sampling_clip_min", "vllm_importance_sampling_clip_min (%g) must be less than vllm_importance_sampling_clip_max (%g)", *lo, *hi)
	}
	if c.VLLMImportanceSamplingCorrection && lo == nil && hi == nil &&
		(c.VLLMImportanceSamplingMode == ISTokenTruncate || c.VLLMImportanceSamplingMode == ISSequenceTruncate) {
		bad("vllm_importance_sampling_mode", "at least one of vllm_importance_sampling_clip_min or vllm_importance_sampling_clip_max must be set when vllm_importance_sampling_mode is %q", c.VLLMImportanceSamplingMode)
	}
	seen := map[string]bool{}
	for i, r := range c.Rewards {
		if r.Name == "" {
			bad("rewards[%d]", "rewards[%d]: name must not be empty", i)
		} else if seen[r.Name] {
			bad("rewards[%d]", "rewards[%d]: reward %q listed twice", i, r.Name)
		}
		seen[r.Name] = true
		finite(fmt.Sprintf("rewards[%d].weight", i), r.Weight)
	}
	if c.DynamicSamplingMaxRounds < 0 {
		bad("dynamic_sampling_max_rounds", "dynamic_sampling_max_rounds must be >= 0 (0: no bound), got %d", c.DynamicSamplingMaxRounds)
	}
	return errors.Join(errs...)
}

// StepsEvery turns logging_steps or save_steps (an integer, or a ratio of the total steps when < 1)
// into a step interval, as transformers does (ceil of ratio x total).
func StepsEvery(v float64, totalSteps int) int {
	if v < 1 {
		n := int(math.Ceil(v * float64(totalSteps)))
		return max(n, 1)
	}
	return int(v)
}

// PromptsPerGeneration is the number of distinct prompts in one generation batch
// (generation_batch_size / num_generations): the prompts one optimizer step trains on when
// steps_per_generation equals gradient_accumulation_steps (TRL's default).
func (c *Config) PromptsPerGeneration() (int, error) {
	gbs, _, err := c.Generation()
	if err != nil {
		return 0, err
	}
	if c.NumGenerations < 1 || gbs%c.NumGenerations != 0 {
		return 0, fmt.Errorf("generation batch size %d is not a multiple of num_generations %d", gbs, c.NumGenerations)
	}
	return gbs / c.NumGenerations, nil
}

// StepsPerEpoch is the number of optimizer steps in one pass over numPrompts prompts, as TRL's
// RepeatSampler and the transformers Trainer count them: the prompts are cut to a whole number k of
// generation batches, the dataloader then holds k x steps_per_generation x num_iterations batches,
// and an epoch is that divided by gradient_accumulation_steps (at least 1).
func (c *Config) StepsPerEpoch(numPrompts int) (int, error) {
	p, err := c.PromptsPerGeneration()
	if err != nil {
		return 0, err
	}
	_, spg, _ := c.Generation()
	k := numPrompts / p
	if k == 0 {
		return 0, fmt.Errorf("%d prompts: one generation batch needs %d (per_device_train_batch_size %d x steps_per_generation %d / num_generations %d)",
			numPrompts, p, c.PerDeviceTrainBatchSize, spg, c.NumGenerations)
	}
	return max(k*spg*c.NumIterations/c.GradientAccumulationSteps, 1), nil
}

// TotalSteps is the length of the run in optimizer steps: max_steps when > 0, else
// ceil(num_train_epochs x StepsPerEpoch) as the transformers Trainer computes it.
func (c *Config) TotalSteps(numPrompts int) (int, error) {
	if c.MaxSteps > 0 {
		return c.MaxSteps, nil
	}
	per, err := c.StepsPerEpoch(numPrompts)
	if err != nil {
		return 0, err
	}
	return int(math.Ceil(c.NumTrainEpochs * float64(per))), nil
}

// NeedsOldLogProbs reports whether the trainer must compute the old policy's log-probabilities before
// optimising (TRL: num_iterations > 1 or steps_per_generation > gradient_accumulation_steps). When
// false, TRL uses the current log-probabilities detached, so every importance ratio is exactly 1:
// pass LossInputs.OldLogP = nil to do the same.
func (c *Config) NeedsOldLogProbs() bool {
	_, spg, err := c.Generation()
	return c.NumIterations > 1 || (err == nil && spg > c.GradientAccumulationSteps)
}
