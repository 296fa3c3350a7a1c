package train

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/runlog"
)

// Learning-rate scheduler types (TrainingArguments.lr_scheduler_type) that this package implements.
const (
	SchedulerLinear             = "linear"
	SchedulerCosine             = "cosine"
	SchedulerConstant           = "constant"
	SchedulerConstantWithWarmup = "constant_with_warmup"
)

// Arguments are the transformers TrainingArguments every mcprl trainer reads, with their YAML names.
// Trainers' configs inline them.
type Arguments struct {
	// Where checkpoints, metrics.jsonl and the final model go.
	OutputDir string `yaml:"output_dir"`

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
	// GradientCheckpointing trades time for memory: the training graph computes each layer's attention
	// probabilities, and with lora_dropout each LoRA branch's dropout mask and dropped-out input, again in the
	// backward pass rather than keeping them from the forward pass (model.Model.SetGradientCheckpointing; for
	// SmolLM2-135M at 8 x 512 tokens with LoRA on q/v 1.7 GiB less at the step's peak and about 12% more time a
	// step on XLA). The results are the same bit for bit. It recomputes those only, not whole layers as
	// transformers' does, and is off unless a config turns it on, where TRL defaults to true: the switch changes
	// no result, and on by default it would slow every run.
	GradientCheckpointing bool `yaml:"gradient_checkpointing"`
	// BF16 runs the model in bfloat16, as transformers with bf16: true on a bfloat16 base: the frozen weights are
	// stored in bfloat16 (half the memory) and the linear layers' matmuls take bfloat16 inputs, while norms,
	// softmax, the log-probs the loss reads, the trained weights and the optimizer state stay float32
	// (model.Model.SetBF16; docs/model.md). Engine xla only: on simplego it is refused. Off by default.
	BF16 bool `yaml:"bf16"`
	// ReportTo names where logs go besides metrics.jsonl: "tensorboard" (event files in LoggingDir) or
	// "none" (the default).
	ReportTo   runlog.ReportTo `yaml:"report_to"`
	LoggingDir string          `yaml:"logging_dir"` // "": OUTPUT_DIR/runs/MonDD_HH-MM-SS_HOST
}

// Inputs are mcprl's own keys naming what a run loads.
type Inputs struct {
	Model    string `yaml:"model"`    // model directory (HF layout)
	Tasks    string `yaml:"tasks"`    // tasks JSONL
	Fixtures string `yaml:"fixtures"` // fixtures directory
	DSN      string `yaml:"dsn"`      // PostgreSQL DSN for sandboxes; "" = embedded SQLite
	// Engine is what runs the model: auto (the default: XLA where its plugin loads, else simplego), xla or
	// simplego (model.Engine); a command's --engine overrides it.
	Engine model.Engine `yaml:"engine"`
	// SamplingEngine is the engine a GRPO run's rollouts sample on when it is not the one that trains (engine):
	// they sample on a copy of the weights there (model.Replica), refreshed from the trained weights (with LoRA,
	// the adapter) before each generation batch that follows an optimizer step, as TRL samples on vLLM and syncs
	// the weights to it. "" (the default) samples on the training engine's model itself. train's
	// --sampling-engine overrides it; sft refuses it, and eval (one phase) samples on engine.
	SamplingEngine model.Engine `yaml:"sampling_engine"`
}

// Check records an invalid engine or sampling engine.
func (in *Inputs) Check(c *Checker) {
	if _, err := model.ParseEngine(string(in.Engine)); err != nil {
		c.Bad("engine", "%v", err)
	}
	if _, err := model.ParseEngine(string(in.SamplingEngine)); err != nil && in.SamplingEngine != "" {
		c.Bad("sampling_engine", "sampling_engine %q: want one of %s (or leave it unset: sample on engine)", in.SamplingEngine, model.Engines)
	}
}

// CheckBF16 records bf16: true with an engine that cannot run it: simplego, named as engine or sampling_engine
// (engine auto is decided when the run opens it, and model.Model.SetBF16 refuses simplego then).
func CheckBF16(c *Checker, bf16 bool, in *Inputs) {
	if !bf16 {
		return
	}
	for _, e := range []struct {
		key string
		v   model.Engine
	}{{"engine", in.Engine}, {"sampling_engine", in.SamplingEngine}} {
		if e.v == model.EngineSimpleGo {
			c.Bad("bf16", "bf16: true with %s simplego: %v", e.key, model.ErrBF16SimpleGo)
		}
	}
}

// OnePhase is in for a run with one phase (eval: it samples on engine), without a sampling engine.
func (in Inputs) OnePhase() Inputs {
	in.SamplingEngine = ""
	return in
}

// DefaultArguments returns TRL's defaults for the TrainingArguments (TRL overrides transformers'
// learning_rate with 1e-6 and logging_steps with 10).
func DefaultArguments() Arguments {
	return Arguments{
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
	}
}

// ValueError is one invalid value found by a Validate: Key is the YAML key (rewards[i] for a
// list item), Line its line when the config came from YAML (0 otherwise).
type ValueError struct {
	Key  string
	Line int
	Msg  string
}

func (e *ValueError) Error() string { return e.Msg }

// Checker gathers the ValueErrors of a Validate.
type Checker struct{ errs []error }

// Bad records an invalid value of key; a key containing %d is formatted with args[0].
func (c *Checker) Bad(key, format string, args ...any) {
	if strings.Contains(key, "%d") {
		key = fmt.Sprintf(key, args[0])
	}
	c.errs = append(c.errs, &ValueError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// Add records an error about key.
func (c *Checker) Add(key string, err error) {
	c.errs = append(c.errs, &ValueError{Key: key, Msg: err.Error()})
}

// Finite records an error unless v is a finite number and reports whether it is.
func (c *Checker) Finite(key string, v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		c.errs = append(c.errs, &ValueError{Key: key, Msg: fmt.Sprintf("%s must be a finite number, got %v", key, v)})
		return false
	}
	return true
}

// Err joins the recorded errors (nil when there are none).
func (c *Checker) Err() error { return errors.Join(c.errs...) }

// Check records the problems of a's values, as transformers' TrainingArguments.__post_init__ and the
// Trainer report them.
func (a *Arguments) Check(c *Checker) {
	if err := runlog.CheckReportTo(a.ReportTo); err != nil {
		c.Bad("report_to", "%v", err)
	}
	if a.OutputDir == "" {
		c.Bad("output_dir", "output_dir must not be empty")
	}
	if c.Finite("learning_rate", a.LearningRate) && a.LearningRate < 0 {
		c.Bad("learning_rate", "learning_rate must be >= 0, got %g", a.LearningRate)
	}
	if c.Finite("num_train_epochs", a.NumTrainEpochs) && a.MaxSteps <= 0 && a.NumTrainEpochs <= 0 {
		c.Bad("num_train_epochs", "num_train_epochs must be > 0 when max_steps is not set, got %g", a.NumTrainEpochs)
	}
	if a.PerDeviceTrainBatchSize < 1 {
		c.Bad("per_device_train_batch_size", "per_device_train_batch_size must be >= 1, got %d", a.PerDeviceTrainBatchSize)
	}
	if a.GradientAccumulationSteps < 1 {
		c.Bad("gradient_accumulation_steps", "gradient_accumulation_steps must be >= 1, got %d", a.GradientAccumulationSteps)
	}
	if c.Finite("logging_steps", a.LoggingSteps) && a.LoggingSteps <= 0 {
		c.Bad("logging_steps", "logging_steps must be > 0, got %g", a.LoggingSteps)
	} else if a.LoggingSteps > 1 && a.LoggingSteps != math.Trunc(a.LoggingSteps) {
		c.Bad("logging_steps", "logging_steps must be an integer or a ratio in (0, 1), got %g", a.LoggingSteps)
	}
	if c.Finite("save_steps", a.SaveSteps) && a.SaveSteps <= 0 {
		c.Bad("save_steps", "save_steps must be > 0, got %g", a.SaveSteps)
	} else if a.SaveSteps > 1 && a.SaveSteps != math.Trunc(a.SaveSteps) {
		c.Bad("save_steps", "save_steps must be an integer or a ratio in (0, 1), got %g", a.SaveSteps)
	}
	if a.SaveTotalLimit != nil && *a.SaveTotalLimit < 1 {
		c.Bad("save_total_limit", "save_total_limit must be >= 1 when set, got %d", *a.SaveTotalLimit)
	}
	switch a.LRSchedulerType {
	case SchedulerLinear, SchedulerCosine, SchedulerConstant, SchedulerConstantWithWarmup:
	default:
		c.Bad("lr_scheduler_type", "lr_scheduler_type %q is not supported (use linear, cosine, constant or constant_with_warmup)", a.LRSchedulerType)
	}
	if c.Finite("warmup_ratio", a.WarmupRatio) && (a.WarmupRatio < 0 || a.WarmupRatio > 1) {
		c.Bad("warmup_ratio", "warmup_ratio must be in [0, 1], got %g", a.WarmupRatio)
	}
	if c.Finite("warmup_steps", a.WarmupSteps) && a.WarmupSteps < 0 {
		c.Bad("warmup_steps", "warmup_steps must be >= 0, got %g", a.WarmupSteps)
	} else if a.WarmupSteps > 1 && a.WarmupSteps != math.Trunc(a.WarmupSteps) {
		c.Bad("warmup_steps", "warmup_steps must be an integer or a ratio in (0, 1), got %g", a.WarmupSteps)
	}
	if c.Finite("weight_decay", a.WeightDecay) && a.WeightDecay < 0 {
		c.Bad("weight_decay", "weight_decay must be >= 0, got %g", a.WeightDecay)
	}
	if c.Finite("adam_beta1", a.AdamBeta1) && (a.AdamBeta1 < 0 || a.AdamBeta1 >= 1) {
		c.Bad("adam_beta1", "adam_beta1 must be in [0, 1), got %g", a.AdamBeta1)
	}
	if c.Finite("adam_beta2", a.AdamBeta2) && (a.AdamBeta2 < 0 || a.AdamBeta2 >= 1) {
		c.Bad("adam_beta2", "adam_beta2 must be in [0, 1), got %g", a.AdamBeta2)
	}
	if c.Finite("adam_epsilon", a.AdamEpsilon) && a.AdamEpsilon <= 0 {
		c.Bad("adam_epsilon", "adam_epsilon must be > 0, got %g", a.AdamEpsilon)
	}
	if c.Finite("max_grad_norm", a.MaxGradNorm) && a.MaxGradNorm < 0 {
		c.Bad("max_grad_norm", "max_grad_norm must be >= 0 (0 disables clipping), got %g", a.MaxGradNorm)
	}
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
