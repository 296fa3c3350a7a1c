package grpo

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/train"
	"gopkg.in/yaml.v3"
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

const defaultDynamicSamplingRounds = 3

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
	// TrainingArguments (TRL overrides: learning_rate 1e-6, logging_steps 10).
	train.Arguments `yaml:",inline"`
	// mcprl's own keys naming what to load: model, tasks, fixtures, dsn.
	train.Inputs `yaml:",inline"`
	// LoRA (TRL ModelConfig's names).
	train.PeftArguments `yaml:",inline"`

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
	// SamplingDType is the precision the rollouts sample in, as `trl vllm-serve --dtype` sets vLLM's: "bfloat16"
	// samples on a copy of the weights (model.Replica) stored in bfloat16, with the linear layers' matmuls on
	// bfloat16 inputs, while training stays in float32 (decoding reads every weight once a token, so half the
	// bytes decode faster: docs/benchmarks.md); "float32" samples in float32 where bf16: true trains in bfloat16;
	// "" or "auto" (the default) samples in the training model's own precision. The importance-sampling
	// correction (vllm_importance_sampling_correction) covers the gap, as it does vLLM's. Engine xla only for
	// bfloat16.
	SamplingDType string `yaml:"sampling_dtype"`

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
	// DisableDropout turns a LoRA adapter's lora_dropout off in the loss's forward, as TRL's disable_dropout sets
	// every nn.Dropout's p to 0 (the model has no other dropout).
	DisableDropout bool `yaml:"disable_dropout"`

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
	Rewards []RewardSpec `yaml:"rewards"`
	// DynamicSampling drops groups whose rewards all agree (zero std) and generates more groups to
	// refill the batch, as DAPO/verl's filter_groups; TRL has no such option.
	DynamicSampling bool `yaml:"dynamic_sampling"`
	// DynamicSamplingMaxRounds bounds the generation rounds per step when refilling (0: no bound).
	DynamicSamplingMaxRounds int `yaml:"dynamic_sampling_max_rounds"`

	// Recovery branching (docs/grpo.md): at a trajectory's first setback (an observation that matches
	// RecoveryTriggers), fork its sandbox and sample RecoveryGenerations continuations from the same
	// prefix; each continuation's own tokens get an advantage within its branch group, the prefix keeps
	// the root's. At most RecoveryMaxBranchesPerStep roots a generation batch are branched.
	// RecoveryForcedCallRatio is the share of each setback's continuations (rounded to a whole
	// number) that are made to retry: their first turn starts with the tool-call opener, untrained,
	// and the policy writes the call; the rest are sampled freely, so the branch group compares
	// retrying with whatever else the policy does after the setback.
	RecoveryBranching          bool     `yaml:"recovery_branching"`
	RecoveryGenerations        int      `yaml:"recovery_generations"`
	RecoveryMaxBranchesPerStep int      `yaml:"recovery_max_branches_per_step"`
	RecoveryTriggers           []string `yaml:"recovery_triggers"`
	RecoveryForcedCallRatio    float64  `yaml:"recovery_forced_call_ratio"`
	// RecoveryForcedOpenerLoss trains the forced opener too: its tokens carry their continuation's
	// branch advantage, with the policy's own log-probabilities after the setback as their old ones,
	// so a retry that beats its free siblings makes the policy likelier to start one by itself.
	RecoveryForcedOpenerLoss bool `yaml:"recovery_forced_opener_loss"`
	// RecoveryForcedLook makes a forced continuation look before it retries where the setback was a
	// query it can read: a whole call, the look a careful engineer takes next (the tables where one was
	// missing, a row of the failed query's table, the values of the column an empty query filtered
	// on), runs first, and the tool-call opener follows its observation; the policy writes the retry's
	// call. With RecoveryForcedOpenerLoss the look and that opener are trained as the opener alone is.
	RecoveryForcedLook bool `yaml:"recovery_forced_look"`

	// Ignored lists the TRL keys found in the file that change nothing in mcprl (logging destinations,
	// PyTorch precision and memory switches), as "key (line N)"; the CLI should mention them.
	Ignored []string `yaml:"-"`
}

// schema is what a GRPO config file may hold besides Config's fields: the TrainingArguments
// options with no effect or no implementation, and TRL GRPOConfig's.
var schema = train.Schema{
	Kind: "TRL GRPOConfig",
	NoEffect: train.Union(train.NoEffect, train.SetOf("log_completions", "num_completions_to_print",
		"log_unique_prompts", "log_multimodal", "ds3_gather_for_generation", "trust_remote_code", "model_init_kwargs")),
	Unsupported: train.Union(train.Unsupported, train.SetOf("cache_implementation", "cast_lm_head_to_fp32",
		"chat_template_kwargs", "delta", "entropy_coef", "entropy_coef_delta", "entropy_coef_max", "entropy_coef_min",
		"entropy_target", "generation_kwargs", "min_p", "multi_objective_aggregation", "num_generations_eval",
		"off_policy_mask_threshold", "pad_to_multiple_of", "ref_model_mixup_alpha", "ref_model_sync_steps",
		"repetition_penalty", "reward_weights", "router_aux_loss_coef", "sapo_temperature_neg", "sapo_temperature_pos",
		"sync_ref_model", "top_entropy_quantile", "use_adaptive_entropy", "use_vllm",
		"vespo_k_neg", "vespo_k_pos", "vespo_lambda_neg", "vespo_lambda_pos")),
}

// Default returns TRL's GRPOConfig defaults (TRL 2026-07 with transformers' TrainingArguments).
func Default() Config {
	return Config{
		Arguments:                train.DefaultArguments(),
		PeftArguments:            train.DefaultPeftArguments(),
		UseBiasCorrectionKL:      true,
		NumGenerations:           8,
		MaxCompletionLength:      512,
		ShuffleDataset:           true,
		Temperature:              1.0,
		TopP:                     1.0,
		NumIterations:            1,
		Epsilon:                  0.2,
		ImportanceSamplingLevel:  LevelToken,
		ScaleRewards:             ScaleGroup,
		LossType:                 LossDAPO,
		DynamicSamplingMaxRounds: defaultDynamicSamplingRounds,

		RecoveryGenerations:        4,
		RecoveryMaxBranchesPerStep: 4,
		RecoveryTriggers:           append([]string(nil), rollout.AllTriggers...),

		VLLMImportanceSamplingCorrection: true,
		VLLMImportanceSamplingMode:       ISSequenceMask,
		VLLMImportanceSamplingClipMax:    ptr(3.0),
	}
}

func ptr[T any](v T) *T { return &v }

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
	ignored, err := train.Decode(data, name, &cfg, schema)
	if err != nil {
		return nil, err
	}
	cfg.Ignored = ignored
	return &cfg, nil
}

// Resolve derives values from others after decoding, as TRL's __post_init__:
// the deprecated vllm_importance_sampling_cap is the clip max.
func (c *Config) Resolve() {
	if c.VLLMImportanceSamplingCap != nil {
		c.VLLMImportanceSamplingClipMax = ptr(*c.VLLMImportanceSamplingCap)
	}
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

// RewardFuncs builds the configured reward functions, in the order of
// Rewards (their weights are RewardWeights); a config without any is an
// error.
func (c *Config) RewardFuncs() ([]reward.Func, error) {
	reg := reward.NewRegistry()
	funcs := make([]reward.Func, 0, len(c.Rewards))
	for _, r := range c.Rewards {
		f, err := reg.New(r.Name)
		if err != nil {
			return nil, fmt.Errorf("rewards: %w", err)
		}
		funcs = append(funcs, f)
	}
	if len(funcs) == 0 {
		return nil, errors.New("no rewards configured")
	}
	return funcs, nil
}

// Validate checks the values the way TRL's __post_init__ and the trainer do, and reports all problems.
func (c *Config) Validate() error {
	var ck train.Checker
	c.Arguments.Check(&ck)
	c.Inputs.Check(&ck)
	train.CheckBF16(&ck, c.BF16, &c.Inputs)
	c.PeftArguments.Check(&ck)
	bad, finite := ck.Bad, ck.Finite
	switch c.SamplingDType {
	case "", "auto", "float32":
	case "bfloat16":
		if e := c.Inputs.SamplingEngine; e == model.EngineSimpleGo || e == "" && c.Inputs.Engine == model.EngineSimpleGo {
			bad("sampling_dtype", "sampling_dtype: bfloat16 samples on engine simplego: %v", model.ErrBF16SimpleGo)
		}
	default:
		bad("sampling_dtype", "sampling_dtype %q: want auto, float32 or bfloat16", c.SamplingDType)
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
			ck.Add("generation_batch_size", err)
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
	// A reward listed twice, also through an alias (seed and
	// compute_mcp_reward are one reward), would be counted twice.
	reg := reward.NewRegistry()
	seen := map[string]int{}
	for i, r := range c.Rewards {
		name := reg.Resolve(r.Name)
		j, dup := seen[name]
		switch {
		case r.Name == "":
			bad("rewards[%d]", "rewards[%d]: name must not be empty", i)
		case dup && c.Rewards[j].Name == r.Name:
			bad("rewards[%d]", "rewards[%d]: reward %q listed twice", i, r.Name)
		case dup:
			bad("rewards[%d]", "rewards[%d]: reward %q listed twice: rewards[%d] names it %q (both are %s)", i, r.Name, j, c.Rewards[j].Name, name)
		default:
			seen[name] = i
		}
		finite(fmt.Sprintf("rewards[%d].weight", i), r.Weight)
	}
	if c.DynamicSamplingMaxRounds < 0 {
		bad("dynamic_sampling_max_rounds", "dynamic_sampling_max_rounds must be >= 0 (0: no bound), got %d", c.DynamicSamplingMaxRounds)
	}
	if c.RecoveryBranching {
		if c.RecoveryGenerations < 2 {
			bad("recovery_generations", "recovery_generations must be at least 2 to compute a branch group's advantages, got %d", c.RecoveryGenerations)
		}
		if c.RecoveryMaxBranchesPerStep < 1 {
			bad("recovery_max_branches_per_step", "recovery_max_branches_per_step must be >= 1, got %d", c.RecoveryMaxBranchesPerStep)
		}
		if !(c.RecoveryForcedCallRatio >= 0 && c.RecoveryForcedCallRatio <= 1) {
			bad("recovery_forced_call_ratio", "recovery_forced_call_ratio must be in [0, 1], got %v", c.RecoveryForcedCallRatio)
		}
		if c.RecoveryForcedOpenerLoss && forcedContinuations(c.RecoveryForcedCallRatio, c.RecoveryGenerations) == 0 {
			bad("recovery_forced_opener_loss", "recovery_forced_opener_loss needs forced continuations: recovery_forced_call_ratio x recovery_generations rounds to 0")
		}
		if c.RecoveryForcedLook && forcedContinuations(c.RecoveryForcedCallRatio, c.RecoveryGenerations) == 0 {
			bad("recovery_forced_look", "recovery_forced_look needs forced continuations: recovery_forced_call_ratio x recovery_generations rounds to 0")
		}
		if len(c.RecoveryTriggers) == 0 {
			bad("recovery_triggers", "recovery_triggers must name at least one of %v", rollout.AllTriggers)
		} else if _, err := rollout.NewTriggers(c.RecoveryTriggers); err != nil {
			ck.Add("recovery_triggers", err)
		}
	}
	return ck.Err()
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
