package train

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/progress"
	"github.com/mcprl/mcprl/report"
	"github.com/mcprl/mcprl/runlog"
)

// Loop is the step loop every trainer shares: it schedules the learning
// rate, gathers what to log between logging steps into metrics.jsonl (and
// the run log: completions.jsonl, TensorBoard events for report_to,
// progress), writes checkpoint-STEP/ every save_steps and final/ at the
// end, and rewrites report.html after each save.
type Loop struct {
	Args  *Arguments
	Model *model.Model // saved in checkpoints, with the optimizer state in its context
	// TokenizerDir is copied into every checkpoint ("" copies nothing).
	TokenizerDir string
	// TotalSteps is the length of the run; StepsPerEpoch turns steps into
	// the logged epoch.
	TotalSteps, StepsPerEpoch int
	// CanSave, when set, reports whether a checkpoint may be written after
	// step (GRPO saves only where a generation batch ends); nil: any step.
	CanSave func(step int) bool
	// Label names the run in the progress output ("train", "sft").
	Label string
	// Show names the logged values the progress shows besides the loss
	// ("reward").
	Show []string
	// Progress receives the progress (a live bar on a terminal, a line per
	// logging step elsewhere); nil prints nothing.
	Progress io.Writer
}

// StepResult is what one optimizer step reports to the loop.
type StepResult struct {
	// Loss is the sum of the step's micro-batch losses; GradNorm its
	// gradient norm before clipping.
	Loss, GradNorm float64
	// Show are values the progress shows for this step before the loss
	// (the reward).
	Show []progress.Field
	// Samples are the trajectories the step trained on, stamped with its
	// step: completions.jsonl keeps those of the logging steps.
	Samples []report.Completion
}

// Step runs one optimizer step, the update after st.GlobalStep steps, with
// learning rate lr, and adds what it measured besides the loss and the
// gradient norm to w.
type Step func(ctx context.Context, st *State, lr float64, w *LogWindow) (StepResult, error)

// Run takes steps from st (a fresh State, or one Restore returned) until
// TotalSteps, then saves final/. metrics.jsonl and completions.jsonl keep
// the lines of the steps st has already done.
func (l *Loop) Run(ctx context.Context, st *State, step Step) error {
	a := l.Args
	total := l.TotalSteps
	st.MaxSteps = total
	if err := os.MkdirAll(a.OutputDir, 0o755); err != nil {
		return err
	}
	metrics, err := OpenMetrics(filepath.Join(a.OutputDir, "metrics.jsonl"), st.GlobalStep)
	if err != nil {
		return err
	}
	defer metrics.Close()
	log, err := runlog.Open(runlog.Options{
		OutputDir: a.OutputDir, Label: l.Label, TotalSteps: total, StartStep: st.GlobalStep,
		Progress: l.Progress, ReportTo: a.ReportTo, LoggingDir: a.LoggingDir,
	})
	if err != nil {
		return err
	}
	defer log.Close()
	logEvery := StepsEvery(a.LoggingSteps, total)
	saveEvery := StepsEvery(a.SaveSteps, total)
	show := append(append([]string(nil), l.Show...), "loss")
	window := NewLogWindow()
	for st.GlobalStep < total {
		if err := ctx.Err(); err != nil {
			return err
		}
		lr, err := a.LearningRateAt(st.GlobalStep, total)
		if err != nil {
			return err
		}
		// A LoRA adapter's dropout masks derive from the seed and the step, so a resumed run draws the same.
		if err := l.Model.SeedDropout(a.Seed, st.GlobalStep); err != nil {
			return err
		}
		res, err := step(ctx, st, lr, window)
		if err != nil {
			return fmt.Errorf("step %d: %w", st.GlobalStep+1, err)
		}
		window.AddStep(res.Loss, res.GradNorm)
		st.GlobalStep++
		st.Epoch = float64(st.GlobalStep) / float64(l.StepsPerEpoch)
		// The bar's speed counts the steps this process ran (a resumed run did not run the earlier ones).
		log.Step(st.GlobalStep, append(res.Show, progress.Field{Name: "loss", Value: res.Loss, Format: "%.4f"})...)
		if st.GlobalStep%logEvery == 0 || st.GlobalStep == total {
			next, _ := a.LearningRateAt(st.GlobalStep, total)
			logs := window.Flush(next)
			logs["step"] = float64(st.GlobalStep)
			logs["epoch"] = st.Epoch
			rec := MetricsRecord(logs)
			if err := metrics.Write(rec); err != nil {
				return err
			}
			st.LogHistory = append(st.LogHistory, rec)
			if err := log.Logged(st.GlobalStep, logs, res.Samples, show...); err != nil {
				return err
			}
		}
		if st.GlobalStep%saveEvery == 0 && st.GlobalStep < total && (l.CanSave == nil || l.CanSave(st.GlobalStep)) {
			if err := SaveCheckpoint(filepath.Join(a.OutputDir, fmt.Sprintf("checkpoint-%d", st.GlobalStep)), l.Model, l.TokenizerDir, st); err != nil {
				return err
			}
			log.Saved()
		}
	}
	if err := SaveCheckpoint(filepath.Join(a.OutputDir, "final"), l.Model, l.TokenizerDir, st); err != nil {
		return err
	}
	log.Saved()
	return log.Close()
}
