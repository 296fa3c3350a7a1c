package grpo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/train"
)

// TestUserConfigLoadsAsIs loads the user's GRPOConfig (testdata/user_config.yaml, the seed's keyword
// arguments written as YAML) and checks every value, and that the rest are TRL's defaults.
func TestUserConfigLoadsAsIs(t *testing.T) {
	cfg, err := Load("testdata/user_config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.OutputDir = "./qwen-mcp-grpo-checkpoints"
	want.LearningRate = 1e-5
	want.NumTrainEpochs = 3
	want.PerDeviceTrainBatchSize = 4
	want.GradientAccumulationSteps = 4
	want.NumGenerations = 8
	want.MaxPromptLength = 1024
	want.MaxCompletionLength = 1024
	want.LoggingSteps = 10
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", *cfg, want)
	}
	gbs, spg, err := cfg.Generation()
	if err != nil || gbs != 16 || spg != 4 {
		t.Errorf("Generation() = %d, %d, %v; want TRL's 16 (4 x 4), 4", gbs, spg, err)
	}
	if cfg.EffectiveEpsilonHigh() != 0.2 {
		t.Errorf("epsilon_high defaults to epsilon: got %v", cfg.EffectiveEpsilonHigh())
	}
}

// TestDefaultsAreTRLs pins the defaults to TRL GRPOConfig / transformers TrainingArguments.
func TestDefaultsAreTRLs(t *testing.T) {
	c := Default()
	checks := []struct {
		key       string
		got, want any
	}{
		{"learning_rate", c.LearningRate, 1e-6},
		{"num_train_epochs", c.NumTrainEpochs, 3.0},
		{"max_steps", c.MaxSteps, -1},
		{"per_device_train_batch_size", c.PerDeviceTrainBatchSize, 8},
		{"gradient_accumulation_steps", c.GradientAccumulationSteps, 1},
		{"logging_steps", c.LoggingSteps, 10.0},
		{"save_steps", c.SaveSteps, 500.0},
		{"seed", c.Seed, int64(42)},
		{"lr_scheduler_type", c.LRSchedulerType, "linear"},
		{"warmup_ratio", c.WarmupRatio, 0.0},
		{"weight_decay", c.WeightDecay, 0.0},
		{"adam_beta1", c.AdamBeta1, 0.9},
		{"adam_beta2", c.AdamBeta2, 0.999},
		{"adam_epsilon", c.AdamEpsilon, 1e-8},
		{"max_grad_norm", c.MaxGradNorm, 1.0},
		{"num_generations", c.NumGenerations, 8},
		{"max_completion_length", c.MaxCompletionLength, 512},
		{"temperature", c.Temperature, 1.0},
		{"top_p", c.TopP, 1.0},
		{"top_k", c.TopK, 0},
		{"beta", c.Beta, 0.0},
		{"num_iterations", c.NumIterations, 1},
		{"epsilon", c.Epsilon, 0.2},
		{"importance_sampling_level", c.ImportanceSamplingLevel, "token"},
		{"scale_rewards", c.ScaleRewards, ScaleGroup},
		{"loss_type", c.LossType, "dapo"},
		{"mask_truncated_completions", c.MaskTruncatedCompletions, false},
		{"disable_dropout", c.DisableDropout, false},
		{"lora_r", c.LoraR, 16},
		{"lora_alpha", c.LoraAlpha, 32.0},
		{"lora_dropout", c.LoraDropout, 0.05},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("default %s = %v, TRL %v", ch.key, ch.got, ch.want)
		}
	}
	if c.EpsilonHigh != nil || c.MaxToolCallingIterations != nil || c.GenerationBatchSize != nil {
		t.Error("epsilon_high, max_tool_calling_iterations and generation_batch_size default to None")
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestScaleRewardsValues(t *testing.T) {
	for in, want := range map[string]ScaleRewards{
		"true": ScaleGroup, "false": ScaleNone, "group": ScaleGroup, "batch": ScaleBatch, "none": ScaleNone,
		`"none"`: ScaleNone, "True": ScaleGroup,
	} {
		cfg, err := Parse([]byte("scale_rewards: "+in+"\n"), "x.yaml")
		if err != nil {
			t.Errorf("scale_rewards: %s: %v", in, err)
			continue
		}
		if cfg.ScaleRewards != want {
			t.Errorf("scale_rewards: %s = %q, want %q", in, cfg.ScaleRewards, want)
		}
	}
	_, err := Parse([]byte("beta: 0.1\nscale_rewards: mean\n"), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "x.yaml:2") || !strings.Contains(err.Error(), "mean") {
		t.Errorf("scale_rewards: mean: error %v, want one naming line 2 and the value", err)
	}
}

// TestConfigErrorsNameKeyAndLine: unknown keys (with a suggestion) and wrong types are reported with the
// file, line and key; all unknown keys at once.
func TestConfigErrorsNameKeyAndLine(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown keys", "output_dir: out\nlearning_rat: 1e-5\nnum_generation: 4\n",
			[]string{`c.yaml:2: unknown key "learning_rat" (did you mean "learning_rate"?)`, `c.yaml:3: unknown key "num_generation" (did you mean "num_generations"?)`}},
		{"unknown nested key", "rewards:\n  - name: seed\n    wieght: 2\n",
			[]string{`c.yaml:3: unknown key "rewards[0].wieght" (did you mean "weight"?)`}},
		{"far-off key", "completely_different: 1\n", []string{`c.yaml:1: unknown key "completely_different"`}},
		{"wrong type", "beta: 0.1\nnum_generations: eight\n", []string{"c.yaml:2: num_generations:", "eight"}},
		{"wrong type float", "epsilon_high: high\n", []string{"c.yaml:1: epsilon_high:", "high"}},
		{"wrong type list", "rewards: seed\n", []string{"c.yaml:1: rewards:"}},
		{"repeated key", "beta: 0.1\nbeta: 0.2\n", []string{`c.yaml:2: key "beta" repeated (first on line 1)`}},
		{"key thrice", "beta: 0.1\nseed: 1\nbeta: 0.2\n\nbeta: 0.3\n", []string{`c.yaml:3: key "beta" repeated (first on line 1)`, `c.yaml:5: key "beta" repeated (first on line 1)`}},
		{"not yaml", "beta: [1\n", []string{"c.yaml"}},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml), "c.yaml")
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error\n%v\nwant it to contain %q", c.name, err, w)
			}
		}
	}
}

func TestConfigValidation(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"per_device_train_batch_size: 3\nnum_generations: 2\n", "must be divisible by num_generations (2)"},
		{"per_device_train_batch_size: 4\ngradient_accumulation_steps: 3\nnum_generations: 8\n", "generation batch size (per_device_train_batch_size 4 x steps_per_generation = 12) must be divisible by num_generations (8)"},
		{"num_generations: 1\n", "num_generations must be at least 2"},
		{"loss_type: cispo\n", `loss_type "cispo" is a TRL loss that mcprl does not implement`},
		{"loss_type: ppo\n", `loss_type "ppo"`},
		{"importance_sampling_level: seq\n", `importance_sampling_level "seq"`},
		{"lr_scheduler_type: polynomial\n", `lr_scheduler_type "polynomial" is not supported`},
		{"top_p: 0\n", "top_p must be in (0, 1]"},
		{"temperature: 0\n", "temperature must be > 0"},
		{"epsilon: 1.5\n", "epsilon must be in [0, 1)"},
		{"generation_batch_size: 16\nsteps_per_generation: 2\n", "cannot both be set"},
		{"generation_batch_size: 12\n", "generation_batch_size (12) must be divisible by per_device_train_batch_size (8)"},
		{"rewards:\n  - name: seed\n  - name: seed\n", `reward "seed" listed twice`},
		{"rewards:\n  - weight: 2\n", "rewards[0]: name must not be empty"},
		{"warmup_ratio: 1.5\n", "warmup_ratio must be in [0, 1]"},
		{"learning_rate: -1\n", "learning_rate must be >= 0"},
		{"logging_steps: 2.5\n", "logging_steps must be an integer or a ratio"},
		{"num_iterations: 0\nbeta: -1\n", "beta must be >= 0"},
		{"use_peft: true\nlora_r: 4\nlora_dropout: 1.0\n", "v.yaml:3: lora: lora_dropout must be in [0, 1), got 1"},
		{"lora_dropout: -0.05\nuse_peft: true\n", "v.yaml:1: lora: lora_dropout must be in [0, 1), got -0.05"},
		{"recovery_branching: true\nrecovery_forced_call_ratio: 1.5\n", "v.yaml:2: recovery_forced_call_ratio must be in [0, 1], got 1.5"},
		{"recovery_branching: true\nrecovery_forced_call_ratio: .nan\n", "recovery_forced_call_ratio must be in [0, 1], got NaN"},
		{"recovery_branching: true\nrecovery_forced_opener_loss: true\n", "v.yaml:2: recovery_forced_opener_loss needs forced continuations: recovery_forced_call_ratio x recovery_generations rounds to 0"},
		{"recovery_branching: true\nrecovery_forced_look: true\n", "v.yaml:2: recovery_forced_look needs forced continuations: recovery_forced_call_ratio x recovery_generations rounds to 0"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml), "v.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.yaml, err, c.want)
		}
	}
	// Several problems are all reported, each with its key's line.
	_, err := Parse([]byte("num_iterations: 0\nbeta: -1\nrewards:\n  - {name: a, weight: .nan}\n"), "v.yaml")
	for _, w := range []string{"v.yaml:1: num_iterations must be >= 1", "v.yaml:2: beta must be >= 0",
		"v.yaml:4: rewards[0].weight must be a finite number"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v, want it to contain %q", err, w)
		}
	}
	var ve *train.ValueError
	if !errors.As(err, &ve) || ve.Line == 0 {
		t.Errorf("errors.As(*ValueError) on %v: %+v", err, ve)
	}
}

// The reward's alias names the same reward: listing both would count it
// twice, so the config is refused at the second entry's line.
func TestRewardListedTwiceThroughAlias(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"rewards:\n  - name: seed\n  - {name: format, weight: 0.5}\n  - name: compute_mcp_reward\n",
			`a.yaml:4: rewards[2]: reward "compute_mcp_reward" listed twice: rewards[0] names it "seed" (both are compute_mcp_reward)`},
		{"rewards:\n  - name: compute_mcp_reward\n  - name: seed\n",
			`a.yaml:3: rewards[1]: reward "seed" listed twice: rewards[0] names it "compute_mcp_reward" (both are compute_mcp_reward)`},
	} {
		_, err := Parse([]byte(c.yaml), "a.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.yaml, err, c.want)
		}
	}
	if _, err := Parse([]byte("rewards:\n  - name: seed\n  - name: format\n"), "a.yaml"); err != nil {
		t.Errorf("distinct rewards refused: %v", err)
	}
}

// RewardFuncs builds the listed rewards in order, an alias under the
// reward's own name.
func TestRewardFuncs(t *testing.T) {
	cfg, err := Parse([]byte("rewards:\n  - name: seed\n  - {name: format, weight: 0.5}\n"), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := cfg.RewardFuncs()
	if err != nil || len(fs) != 2 || fs[0].Name() != "compute_mcp_reward" || fs[1].Name() != "format" {
		t.Fatalf("RewardFuncs: %v, %v", fs, err)
	}
	cfg.Rewards[1].Name = "nonesuch"
	if _, err := cfg.RewardFuncs(); err == nil || !strings.Contains(err.Error(), `rewards: unknown reward "nonesuch"`) {
		t.Errorf("unknown reward: %v", err)
	}
	cfg.Rewards = nil
	if _, err := cfg.RewardFuncs(); err == nil || err.Error() != "no rewards configured" {
		t.Errorf("no rewards: %v", err)
	}
}

func TestRewardWeightDefault(t *testing.T) {
	cfg, err := Parse([]byte("rewards:\n  - name: seed\n  - {name: execution, weight: 0.5}\n"), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.RewardWeights(); len(w) != 2 || w[0] != 1 || w[1] != 0.5 {
		t.Errorf("weights %v, want [1 0.5] (TRL's default weight is 1.0)", w)
	}
}

func TestQuickExampleConfig(t *testing.T) {
	path := filepath.Join("..", "examples", "customers", "quick.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no %s: %v", path, err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tasks == "" || cfg.Fixtures == "" || len(cfg.Rewards) == 0 || cfg.Model == "" {
		t.Errorf("quick.yaml must name model, tasks, fixtures and rewards: %+v", cfg)
	}
}

func ExampleParse() {
	cfg, err := Parse([]byte(`
output_dir: ./qwen-mcp-grpo-checkpoints
learning_rate: 1e-5
per_device_train_batch_size: 4
gradient_accumulation_steps: 4
num_generations: 8
scale_rewards: false
`), "config.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	gbs, _, _ := cfg.Generation()
	fmt.Println(cfg.LearningRate, cfg.LossType, cfg.ScaleRewards, gbs)

	_, err = Parse([]byte("learning_rate: 1e-5\nnum_generatons: 8\n"), "config.yaml")
	fmt.Println(err)
	// Output:
	// 1e-05 dapo none 16
	// config.yaml:2: unknown key "num_generatons" (did you mean "num_generations"?)
}

// TestTotalSteps follows TRL's RepeatSampler and the Trainer's count: the user's config (4 x 4
// completions per step, 8 per prompt) trains on 2 prompts per step.
func TestTotalSteps(t *testing.T) {
	cfg, err := Load("testdata/user_config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := cfg.PromptsPerGeneration(); err != nil || p != 2 {
		t.Errorf("PromptsPerGeneration = %d, %v; want 2", p, err)
	}
	for _, c := range []struct{ prompts, perEpoch, total int }{{100, 50, 150}, {101, 50, 150}, {3, 1, 3}} {
		per, err := cfg.StepsPerEpoch(c.prompts)
		if err != nil || per != c.perEpoch {
			t.Errorf("StepsPerEpoch(%d) = %d, %v; want %d", c.prompts, per, err, c.perEpoch)
		}
		total, err := cfg.TotalSteps(c.prompts)
		if err != nil || total != c.total {
			t.Errorf("TotalSteps(%d) = %d, %v; want %d", c.prompts, total, err, c.total)
		}
	}
	if _, err := cfg.StepsPerEpoch(1); err == nil || !strings.Contains(err.Error(), "needs 2") {
		t.Errorf("1 prompt with 2 per generation batch: error %v", err)
	}
	cfg.NumIterations, cfg.NumTrainEpochs = 2, 0.5
	if total, _ := cfg.TotalSteps(100); total != 50 {
		t.Errorf("num_iterations 2, half an epoch: %d steps, want 50", total)
	}
	cfg.MaxSteps = 7
	if total, _ := cfg.TotalSteps(100); total != 7 {
		t.Errorf("max_steps 7: %d steps", total)
	}
}

// TestReportTo: report_to takes TRL's forms (a name or a list) and names only what mcprl writes; an
// unsupported destination is an error naming its line.
func TestReportTo(t *testing.T) {
	for text, want := range map[string]string{
		"report_to: tensorboard\n":          "tensorboard",
		"report_to: [none]\n":               "none",
		"report_to:\n  - tensorboard\n":     "tensorboard",
		"logging_dir: tb\nreport_to: all\n": "all",
	} {
		cfg, err := Parse([]byte(text), "t.yaml")
		if err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		if got := strings.Join(cfg.ReportTo, ","); got != want || len(cfg.Ignored) != 0 {
			t.Errorf("%q: report_to %q ignored %v, want %q", text, got, cfg.Ignored, want)
		}
	}
	_, err := Parse([]byte("learning_rate: 1e-5\nreport_to: wandb\n"), "t.yaml")
	if err == nil || !strings.Contains(err.Error(), "t.yaml:2") || !strings.Contains(err.Error(), `"wandb"`) {
		t.Errorf("report_to wandb: %v, want an error naming line 2 and wandb", err)
	}
}

// TestTRLOnlyKeys: TRL keys that change nothing here load and are listed; TRL options mcprl does not
// implement are errors that say so, by line.
func TestTRLOnlyKeys(t *testing.T) {
	cfg, err := Parse([]byte("run_name: x\nlearning_rate: 1e-5\nfp16: true\ntf32: true\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Ignored, ", "); got != "run_name (line 1), fp16 (line 3), tf32 (line 4)" {
		t.Errorf("Ignored = %q", got)
	}
	if cfg.LearningRate != 1e-5 {
		t.Errorf("learning_rate %v", cfg.LearningRate)
	}
	// gradient_checkpointing recomputes the attention probabilities in the backward pass: off by default.
	if cfg.GradientCheckpointing {
		t.Error("gradient_checkpointing on by default")
	}
	if gc, err := Parse([]byte("gradient_checkpointing: true\n"), "t.yaml"); err != nil {
		t.Error(err)
	} else if !gc.GradientCheckpointing || len(gc.Ignored) > 0 {
		t.Errorf("gradient_checkpointing: true: read %v, ignored %v", gc.GradientCheckpointing, gc.Ignored)
	}
	// bf16 runs the model in bfloat16 (engine xla): off by default, read, refused beside a simplego engine.
	if cfg.BF16 {
		t.Error("bf16 on by default")
	}
	if b, err := Parse([]byte("bf16: true\n"), "t.yaml"); err != nil {
		t.Error(err)
	} else if !b.BF16 || len(b.Ignored) > 0 {
		t.Errorf("bf16: true: read %v, ignored %v", b.BF16, b.Ignored)
	}
	for _, yaml := range []string{"bf16: true\nengine: simplego\n", "bf16: true\nsampling_engine: simplego\n"} {
		if _, err := Parse([]byte(yaml), "t.yaml"); err == nil || !strings.Contains(err.Error(), "t.yaml:1: bf16: true with ") {
			t.Errorf("%q: %v, want bf16 refused", yaml, err)
		}
	}
	// disable_dropout turns a LoRA adapter's dropout off, so it is a key with an effect.
	if cfg, err := Parse([]byte("disable_dropout: true\n"), "t.yaml"); err != nil {
		t.Errorf("disable_dropout: true: %v", err)
	} else if !cfg.DisableDropout || len(cfg.Ignored) != 0 {
		t.Errorf("disable_dropout: true: DisableDropout %v, ignored %v", cfg.DisableDropout, cfg.Ignored)
	}
	_, err = Parse([]byte("beta: 0.1\ndelta: 1.5\nuse_vllm: true\n"), "t.yaml")
	for _, w := range []string{`t.yaml:2: "delta" is a TRL GRPOConfig option that mcprl does not implement`, `t.yaml:3: "use_vllm"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v, want it to contain %q", err, w)
		}
	}
	// A no-effect key is only accepted at the top level.
	if _, err := Parse([]byte("rewards:\n  - {name: a, bf16: true}\n"), "t.yaml"); err == nil {
		t.Error("bf16 inside a reward: want an unknown-key error")
	}
}

func TestNeedsOldLogProbs(t *testing.T) {
	c := Default()
	if c.NeedsOldLogProbs() {
		t.Error("defaults (num_iterations 1, steps_per_generation = gradient_accumulation_steps): want false")
	}
	c.NumIterations = 2
	if !c.NeedsOldLogProbs() {
		t.Error("num_iterations 2: want true")
	}
	c.NumIterations = 1
	spg := 4
	c.StepsPerGeneration = &spg
	if !c.NeedsOldLogProbs() {
		t.Error("steps_per_generation 4 > gradient_accumulation_steps 1: want true")
	}
}
