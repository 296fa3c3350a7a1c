package grpo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/progress"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/train"
)

// Trainer runs GRPO: for each generation batch it rolls out num_generations
// trajectories per prompt against live sandboxes, scores them, computes group
// advantages and takes optimizer steps on the policy's sampled tokens.
type Trainer struct {
	Config    *Config
	Model     *model.Model
	Ref       *model.Model // frozen reference model; required when beta > 0
	Tokenizer *tokenizer.Tokenizer
	Template  *tokenizer.Template
	// TokenizerDir is copied into every checkpoint ("" copies nothing).
	TokenizerDir string
	Tasks        []task.Task
	// Sandboxes maps a fixture name to its sandbox factory.
	Sandboxes map[string]*sandbox.Factory
	// Rewards are scored per trajectory and summed with Weights (TRL's
	// reward_funcs and reward_weights).
	Rewards []reward.Func
	Weights []float64
	// Progress receives one status line per step; nil prints nothing.
	Progress io.Writer
	// OnGeneration, when set, sees every generation batch with its rewards
	// (for inspection and tests).
	OnGeneration func(step int, trajs []*chat.Trajectory, rewards []float64)
	// SamplingBackend, when set and not Model's own backend, is where the
	// rollouts sample (the config's sampling_engine): Train puts a copy of
	// Model's weights there (model.Replica) and refreshes it from the trained
	// weights before each generation batch that follows an optimizer step.
	// nil samples on Model.
	SamplingBackend backends.Backend

	sampler    *model.Replica
	samplerAt  int           // the optimizer step the sampler's weights are from
	refreshes  int           // refreshes of the sampler
	refreshDur time.Duration // and their time

	accumulate, apply, applyOnly, logProbs, refLogProbs *mlctx.Exec
	vars                                                []*mlctx.Variable
	lossStarts                                          map[[2]int]bool // (length, start column > 0) pairs compiled (lossColumns)
	keepZeroAdvantage                                   bool            // zeroAdvantage never holds: every micro-batch runs (tests)
}

// samplingCopy returns the backend of the copy of the weights the rollouts sample on (model.Replica) and whether
// it runs in bfloat16, or nil where they sample on Model itself: a copy on SamplingBackend where that is another
// backend; on Model's own where sampling_dtype asks for another precision than Model samples in (bfloat16 where
// Model runs in float32 or trains its base weights; float32 where bf16 is on).
func (t *Trainer) samplingCopy() (backends.Backend, bool) {
	m, bf16 := t.Model, t.Model.BF16()
	var differs bool
	switch t.Config.SamplingDType {
	case "bfloat16":
		bf16, differs = true, !m.BF16() || m.LoRA() == nil
	case "float32":
		bf16, differs = false, m.BF16()
	}
	switch {
	case t.SamplingBackend != nil && t.SamplingBackend != m.Backend:
		return t.SamplingBackend, bf16
	case differs:
		return m.Backend, bf16
	}
	return nil, false
}

// Train runs the whole schedule, or what is left of it when resume finds a
// checkpoint in output_dir. Every steps_per_generation x num_iterations /
// gradient_accumulation_steps optimizer steps it draws a new generation
// batch (rollouts, rewards, advantages); each step then trains on its share
// of the batch's micro-batches. It writes metrics.jsonl, checkpoint-STEP/
// every save_steps (at the end of a generation batch) and final/, and ends
// with a summary line.
func (t *Trainer) Train(ctx context.Context, resume bool) error {
	cfg := t.Config
	if cfg.Beta > 0 && t.Ref == nil {
		return fmt.Errorf("grpo: beta %g needs a reference model", cfg.Beta)
	}
	total, perEpoch, cycleSteps, err := t.schedule()
	if err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	st := &train.State{}
	if resume {
		if st, err = train.Restore(cfg.OutputDir, t.Model); err != nil {
			return fmt.Errorf("grpo: %w", err)
		}
	}
	// The saved model folders carry the generation settings.
	if err := t.recordGeneration(st); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if err := t.compile(); err != nil {
		return err
	}
	if backend, bf16 := t.samplingCopy(); backend != nil {
		if t.sampler, err = model.NewReplica(t.Model, backend, bf16); err != nil {
			return fmt.Errorf("grpo: sampling copy: %w", err)
		}
		t.samplerAt = st.GlobalStep
	}
	loop := &train.Loop{
		Args: &cfg.Arguments, Model: t.Model, TokenizerDir: t.TokenizerDir,
		TotalSteps: total, StepsPerEpoch: perEpoch,
		CanSave: func(step int) bool { return step%cycleSteps == 0 },
		Label:   "train", Show: []string{"reward"}, Progress: t.Progress,
	}
	var gen *generation
	// Where the time goes (metrics timing/*, and the summary line): generation batches (the sampler's refresh,
	// rollouts against the sandboxes, rewards, advantages) and optimizer steps (log-probs, forward, backward, AdamW).
	var genDur, stepDur time.Duration
	step := func(ctx context.Context, st *train.State, lr float64, w *train.LogWindow) (train.StepResult, error) {
		offset := st.GlobalStep % cycleSteps
		if gen == nil || offset == 0 {
			began := time.Now()
			if err := t.refreshSampler(st.GlobalStep); err != nil {
				return train.StepResult{}, err
			}
			var err error
			if gen, err = t.generate(ctx, st); err != nil {
				return train.StepResult{}, err
			}
			took := time.Since(began)
			genDur += took
			w.AddAll(gen.metrics)
			w.Add("timing/generation_seconds", took.Seconds())
		}
		// What sampling freed goes back before the step's buffer is taken, and what the step freed before the
		// next phase: the C allocator keeps it otherwise (model.ReleaseMemory).
		began := time.Now()
		model.ReleaseMemory()
		loss, gradNorm, stepMetrics, err := t.optimizerStep(gen, offset, lr)
		model.ReleaseMemory()
		if err != nil {
			return train.StepResult{}, err
		}
		took := time.Since(began)
		stepDur += took
		w.Add("timing/optimizer_step_seconds", took.Seconds())
		for _, m := range stepMetrics {
			w.AddAll(m)
		}
		return train.StepResult{
			Loss: loss, GradNorm: gradNorm, Show: []progress.Field{progress.F("reward", gen.metrics["reward"])},
			Samples: gen.samplesAt(st.GlobalStep + 1),
		}, nil
	}
	start, firstStep := time.Now(), st.GlobalStep
	if err := loop.Run(ctx, st, step); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if t.Progress != nil {
		took := time.Since(start)
		line := summary(st, firstStep, took, filepath.Join(cfg.OutputDir, "final"))
		if took > 0 && genDur+stepDur > 0 {
			line += fmt.Sprintf("; time in generation %.0f%%, in optimizer steps %.0f%%",
				100*genDur.Seconds()/took.Seconds(), 100*stepDur.Seconds()/took.Seconds())
		}
		if t.refreshes > 0 {
			n, bytes := t.sampler.Synced()
			line += fmt.Sprintf("; sampling copy refreshes: %d (%d tensors, %.1f MiB, %.1f ms each)",
				t.refreshes, n, float64(bytes)/(1<<20), float64(t.refreshDur.Microseconds())/1e3/float64(t.refreshes))
		}
		fmt.Fprintln(t.Progress, line)
	}
	return nil
}

// SamplingModel is the model the rollouts sample from: the copy on
// SamplingBackend while Train runs with one, else Model.
func (t *Trainer) SamplingModel() *model.Model {
	if t.sampler != nil {
		return t.sampler.Model
	}
	return t.Model
}

// refreshSampler brings the sampling copy, if there is one, to the weights
// of optimizer step `step` (TRL's weight sync to vLLM before generating).
func (t *Trainer) refreshSampler(step int) error {
	if t.sampler == nil || t.samplerAt == step {
		return nil
	}
	start := time.Now()
	if err := t.sampler.Refresh(); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	t.refreshes++
	t.refreshDur += time.Since(start)
	t.samplerAt = step
	return nil
}

// schedule returns the run's length in optimizer steps, the steps of one
// epoch, and the steps of one generation batch's cycle (steps_per_generation
// x num_iterations / gradient_accumulation_steps).
func (t *Trainer) schedule() (total, perEpoch, cycleSteps int, err error) {
	cfg := t.Config
	if total, err = cfg.TotalSteps(len(t.Tasks)); err != nil {
		return 0, 0, 0, err
	}
	if perEpoch, err = cfg.StepsPerEpoch(len(t.Tasks)); err != nil {
		return 0, 0, 0, err
	}
	_, spg, err := cfg.Generation()
	if err != nil {
		return 0, 0, 0, err
	}
	if (spg*cfg.NumIterations)%cfg.GradientAccumulationSteps != 0 {
		return 0, 0, 0, fmt.Errorf("steps_per_generation (%d) x num_iterations (%d) must be a multiple of gradient_accumulation_steps (%d)",
			spg, cfg.NumIterations, cfg.GradientAccumulationSteps)
	}
	return total, perEpoch, spg * cfg.NumIterations / cfg.GradientAccumulationSteps, nil
}

// recordGeneration puts the generation settings into the state (saved in
// trainer_state.json) and the model's generation_config.json: the
// config's, with the tasks' system prompt when they all share one.
func (t *Trainer) recordGeneration(st *train.State) error {
	g := t.Config.Sampling()
	g.SystemPrompt = task.SharedSystemPrompt(t.Tasks)
	raw, err := json.Marshal(g)
	if err != nil {
		return err
	}
	st.Generation = raw
	t.Model.GenerationConfig, err = g.HFGenerationConfig(t.Model.GenerationConfig)
	return err
}

// summary is the line a run ends with: the steps this process ran and
// their speed, the reward from the first to the last logged step, where
// the model is.
func summary(st *train.State, firstStep int, took time.Duration, final string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "done: %d steps", st.GlobalStep)
	if ran := st.GlobalStep - firstStep; ran > 0 {
		if firstStep > 0 {
			fmt.Fprintf(&b, " (resumed at %d: this process ran steps %d-%d)", firstStep, firstStep+1, st.GlobalStep)
		}
		fmt.Fprintf(&b, " in %s, %.2f s/step", took.Round(time.Second), took.Seconds()/float64(ran))
	}
	if h := st.LogHistory; len(h) > 0 {
		first, last := h[0], h[len(h)-1]
		fmt.Fprintf(&b, "; reward %.3f at step %.0f -> %.3f at step %.0f", number(first["reward"]), number(first["step"]), number(last["reward"]), number(last["step"]))
	}
	fmt.Fprintf(&b, "; model in %s", final)
	return b.String()
}

// number reads a logged value (float64, or int for step; nil for NaN),
// as logged or as read back from trainer_state.json.
func number(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	}
	return math.NaN()
}
