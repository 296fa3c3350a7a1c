package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/sft"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/train"
)

// runFlags are the shared command-line shapes of train, sft and eval.
type runFlags struct {
	config, model, tasks, fixtures, outputDir, dsn string
	maxSteps                                       int
	skipBadTasks, overwrite                        bool
}

func (f *runFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "YAML config with TRL GRPOConfig/TrainingArguments names (required)")
	fl.StringVar(&f.model, "model", "", "HF-format model directory with tokenizer files (overrides the config's model)")
	fl.StringVar(&f.tasks, "tasks", "", "tasks JSONL file (overrides the config's tasks)")
	fl.StringVar(&f.fixtures, "fixtures", "", "directory of fixtures, each named by a task's \"fixture\" (overrides the config's fixtures)")
	fl.StringVar(&f.outputDir, "output-dir", "", "where checkpoints, metrics.jsonl and final/ go (overrides output_dir)")
	fl.StringVar(&f.dsn, "dsn", "", "PostgreSQL DSN for the sandboxes' databases (default: the config's dsn, else embedded SQLite)")
	fl.IntVar(&f.maxSteps, "max-steps", 0, "optimizer steps to run (overrides max_steps when > 0)")
	fl.BoolVar(&f.overwrite, "overwrite_output_dir", false, "start over in an output dir that holds an earlier run's checkpoints, final/ and metrics.jsonl (they are deleted); TRL's name")
	fl.BoolVar(&f.skipBadTasks, "skip-bad-tasks", false, "skip bad lines of the tasks file (listed, counted and written to skipped_tasks.txt in the output dir) instead of failing")
}

// loadConfig reads a train (GRPO) config and applies the flags over it.
func (f *runFlags) loadConfig(warn io.Writer) (*grpo.Config, error) {
	if f.config == "" {
		return nil, errors.New("--config is required")
	}
	cfg, err := grpo.Load(f.config)
	if err != nil {
		return nil, err
	}
	f.override(&cfg.Arguments, &cfg.Inputs, cfg.Ignored, warn)
	return cfg, nil
}

// loadSFTConfig reads an sft config and applies the flags over it.
func (f *runFlags) loadSFTConfig(warn io.Writer) (*sft.Config, error) {
	if f.config == "" {
		return nil, errors.New("--config is required")
	}
	cfg, err := sft.Load(f.config)
	if err != nil {
		return nil, err
	}
	f.override(&cfg.Arguments, &cfg.Inputs, cfg.Ignored, warn)
	return cfg, nil
}

// override applies the flags given over a config's values and notes the
// config's keys that change nothing.
func (f *runFlags) override(args *train.Arguments, in *train.Inputs, ignored []string, warn io.Writer) {
	for _, o := range []struct {
		flag string
		dst  *string
	}{
		{f.model, &in.Model}, {f.tasks, &in.Tasks}, {f.fixtures, &in.Fixtures},
		{f.outputDir, &args.OutputDir}, {f.dsn, &in.DSN},
	} {
		if o.flag != "" {
			*o.dst = o.flag
		}
	}
	if f.maxSteps > 0 {
		args.MaxSteps = f.maxSteps
	}
	for _, k := range ignored {
		fmt.Fprintf(warn, "note: %s: TRL option %s changes nothing in mcprl\n", f.config, k)
	}
}

// workspace is what a run loads once: the model and its tokenizer, the
// tasks, and a sandbox factory per fixture the tasks use.
type workspace struct {
	model     *model.Model
	modelDir  string
	tok       *tokenizer.Tokenizer
	tpl       *tokenizer.Template
	tasks     []task.Task
	skipped   []*task.LineError           // bad task lines skipped under --skip-bad-tasks
	factories map[string]*sandbox.Factory // of the fixtures the tasks use
	sandboxes *sandbox.Factories          // what made them
}

// logSkipped writes the skipped task lines to outputDir/skipped_tasks.txt
// (nothing when none were skipped).
func (w *workspace) logSkipped(outputDir string) error {
	return task.WriteSkipped(outputDir, w.skipped, len(w.tasks))
}

func (w *workspace) Close() {
	if w.sandboxes != nil {
		w.sandboxes.Close()
	}
}

// load opens modelDir (weights and tokenizer files), the tasks with their
// fixtures, and starts a sandbox factory per fixture. Bad task lines fail
// the load, all listed; with skipBad they are reported to warn and skipped.
func load(ctx context.Context, modelDir, tasksPath, fixturesDir, dsn string, skipBad bool, warn io.Writer) (*workspace, error) {
	if modelDir == "" {
		return nil, errors.New("no model: set model in the config or pass --model")
	}
	backend, err := model.NewBackend("")
	if err != nil {
		return nil, err
	}
	if err := model.OpenBLASMissing(); err != nil {
		fmt.Fprintf(warn, "note: OpenBLAS is not in use (%v): the model's matmuls run on the Go kernel, about 8x slower "+
			"(examples/customers/quick.yaml); bash scripts/install-openblas.sh installs it\n", err)
	}
	w := &workspace{modelDir: modelDir}
	if w.model, err = model.Load(backend, modelDir); err != nil {
		return nil, err
	}
	fmt.Fprintf(warn, "matmul: %s; elementwise: %s; DotGeneral gradient: %s\n", model.MatmulEngine(), model.ElementwiseEngine(), model.GradientEngine())
	if w.tok, err = tokenizer.Load(modelDir); err != nil {
		return nil, fmt.Errorf("model %s: %w", modelDir, err)
	}
	if w.tpl, err = w.tok.Template(); err != nil {
		return nil, fmt.Errorf("model %s: %w", modelDir, err)
	}
	if err := w.loadTasks(ctx, tasksPath, fixturesDir, dsn, skipBad, warn); err != nil {
		return nil, err
	}
	return w, nil
}

// loadTasks reads the tasks with their fixtures and starts a sandbox factory
// per fixture the tasks use. Bad task lines fail it, every one listed; with
// skipBad they are counted to warn and skipped (w.skipped).
func (w *workspace) loadTasks(ctx context.Context, tasksPath, fixturesDir, dsn string, skipBad bool, warn io.Writer) error {
	if tasksPath == "" || fixturesDir == "" {
		return errors.New("set tasks and fixtures in the config or pass --tasks and --fixtures")
	}
	fixtures, err := task.LoadFixtures(fixturesDir)
	if err != nil {
		return err
	}
	w.tasks, err = task.Load(tasksPath, task.LoadOptions{Fixtures: fixtures, SkipBad: true})
	var skip *task.SkipError
	if errors.As(err, &skip) {
		if !skipBad {
			return skip.Listed(tasksPath)
		}
		w.skipped = skip.Skipped
		fmt.Fprintf(warn, "warning: --skip-bad-tasks: %v\n", err)
	} else if err != nil {
		return err
	}
	if len(w.tasks) == 0 {
		return fmt.Errorf("%s: no usable tasks", tasksPath)
	}
	w.sandboxes = sandbox.NewFactories(fixtures, sandbox.Options{DSN: dsn})
	w.factories = map[string]*sandbox.Factory{}
	for _, t := range w.tasks {
		if t.Fixture == "" {
			w.Close()
			return fmt.Errorf("%s: task %q names no fixture to run its tools against", tasksPath, t.ID)
		}
		f, err := w.sandboxes.Get(ctx, t.Fixture)
		if err != nil {
			w.Close()
			return err
		}
		w.factories[t.Fixture] = f
	}
	return nil
}

// usePeft attaches a fresh LoRA adapter when the config asks for one (use_peft) and the model has none yet (a
// checkpoint or model directory with an adapter/ subdirectory already brings its own, which then trains).
func (w *workspace) usePeft(cfg *train.PeftArguments, seed int64, warn io.Writer) error {
	if lc := w.model.LoRA(); lc != nil {
		fmt.Fprintf(warn, "LoRA adapter of %s/%s: r %d, alpha %g, %v (base weights frozen)\n", w.modelDir, model.AdapterDir, lc.R, lc.Alpha, lc.TargetModules)
		return nil
	}
	if !cfg.UsePeft {
		return nil
	}
	if err := w.model.AddLoRA(cfg.LoRA(), uint64(seed)); err != nil {
		return err
	}
	lc := w.model.LoRA()
	fmt.Fprintf(warn, "LoRA: r %d, alpha %g, %v (base weights frozen)\n", lc.R, lc.Alpha, lc.TargetModules)
	return nil
}
