package inputs

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gomlx/gomlx/backends"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/train"
)

// Options say what a run loads and how.
type Options struct {
	// Inputs are what a config's keys (and the flags over them) name: the
	// model directory (Load), the tasks JSONL file and the directory of
	// fixtures, each named by a task's "fixture" (both required), the
	// PostgreSQL DSN of the sandboxes' databases ("" uses embedded SQLite)
	// and the engine that runs the model (model.OpenEngine; "" is auto), and
	// the engine a GRPO run samples on (sampling_engine), which Load opens
	// beside it where it resolves to another one.
	train.Inputs
	// SkipBad skips bad task lines (counted to Warn, kept in Skipped)
	// instead of failing with every one listed.
	SkipBad bool
	// Warn receives notes and warnings; nil discards them.
	Warn io.Writer
}

// Loaded is what a run loaded. Close frees its sandbox factories.
type Loaded struct {
	// Model is the policy (nil for LoadTasks), loaded from ModelDir.
	Model    *model.Model
	ModelDir string
	// Engine is the backend the model runs on and what chose it (nil for LoadTasks).
	Engine *model.EngineBackend
	// Sampling is the backend Options' SamplingEngine opened, nil when there is
	// none or it resolved to Engine's.
	Sampling *model.EngineBackend
	// Tokenizer and Template render and encode the conversations.
	Tokenizer *tokenizer.Tokenizer
	Template  *tokenizer.Template
	// Tasks are the usable tasks; Skipped the bad lines skipped under
	// Options.SkipBad.
	Tasks   []task.Task
	Skipped []*task.LineError
	// Sandboxes maps each fixture the tasks use to its started factory.
	Sandboxes map[string]*sandbox.Factory

	factories *sandbox.Factories // what made Sandboxes
}

// Load opens the model in o.Model (weights, tokenizer files and chat
// template) on the engine o.Engine picks, noting to o.Warn first the engine
// line (what runs the model, and on simplego its matmuls), then loads the
// tasks as LoadTasks does.
func Load(ctx context.Context, o Options) (*Loaded, error) {
	if err := o.missing(true); err != nil {
		return nil, err
	}
	modelDir := o.Model
	warn := writer(o.Warn)
	eng, sampling, err := OpenEngines(o.Engine, o.SamplingEngine, warn)
	if err != nil {
		return nil, err
	}
	l := &Loaded{ModelDir: modelDir, Engine: eng, Sampling: sampling}
	if l.Model, err = model.Load(eng.Backend, modelDir); err != nil {
		return nil, err
	}
	if l.Tokenizer, l.Template, err = tokenizer.LoadWithTemplate(modelDir); err != nil {
		return nil, fmt.Errorf("model %s: %w", modelDir, err)
	}
	if err := l.loadTasks(ctx, o); err != nil {
		return nil, err
	}
	return l, nil
}

// OpenEngine opens the backend an engine setting picks and writes its engine
// line to warn, with a note when the simplego engine runs without OpenBLAS.
func OpenEngine(e model.Engine, warn io.Writer) (*model.EngineBackend, error) {
	eng, _, err := OpenEngines(e, "", warn)
	return eng, err
}

// OpenEngines is OpenEngine for a run whose sampling may run on another
// engine: sampling "" (or one that resolves to e's engine and plugin) opens
// nothing more and returns no sampling backend; otherwise it opens that
// engine too. The one engine line names both.
func OpenEngines(e, sampling model.Engine, warn io.Writer) (eng, samp *model.EngineBackend, err error) {
	if eng, err = model.OpenEngine(e); err != nil {
		return nil, nil, err
	}
	line := eng.String()
	if sampling != "" {
		if samp, err = model.OpenEngine(sampling); err != nil {
			return nil, nil, fmt.Errorf("sampling_engine: %w", err)
		}
		if samp.Engine == eng.Engine && samp.Plugin == eng.Plugin {
			samp.Backend.Finalize()
			samp = nil
			line += "; sampling on the same engine"
		} else {
			line += " | sampling " + samp.String() + " (rollouts sample on a copy of the weights, refreshed after optimizer steps)"
		}
	}
	warn = writer(warn)
	fmt.Fprintln(warn, line)
	if err := model.OpenBLASMissing(); err != nil && (!eng.IsXLA() || samp != nil && !samp.IsXLA()) {
		fmt.Fprintf(warn, "note: OpenBLAS is not in use (%v): the model's matmuls run on the Go kernel, about 8x slower "+
			"(examples/customers/quick.yaml); bash scripts/install-openblas.sh installs it, or bash scripts/install-xla.sh "+
			"the XLA engine\n", err)
	}
	return eng, samp, nil
}

// SamplingBackend is the backend a GRPO run samples on when it is not the
// model's own (Sampling's), else nil.
func (l *Loaded) SamplingBackend() backends.Backend {
	if l.Sampling == nil {
		return nil
	}
	return l.Sampling.Backend
}

// LoadTasks loads, for a run without a model of its own, the tasks with
// their fixtures and starts a sandbox factory per fixture they use; tok and
// tpl are the tokenizer and chat template the run renders with. Bad task
// lines fail it, every one listed; with o.SkipBad they are counted to
// o.Warn and skipped.
func LoadTasks(ctx context.Context, tok *tokenizer.Tokenizer, tpl *tokenizer.Template, o Options) (*Loaded, error) {
	if err := o.missing(false); err != nil {
		return nil, err
	}
	l := &Loaded{Tokenizer: tok, Template: tpl}
	if err := l.loadTasks(ctx, o); err != nil {
		return nil, err
	}
	return l, nil
}

// missing says what o lacks, before anything loads: the model (when
// model), the tasks file or the fixtures directory, as a config's keys or
// a command's flags would give them.
func (o *Options) missing(model bool) error {
	if model && o.Model == "" {
		return errors.New("no model: set model in the config or pass --model")
	}
	if o.Tasks == "" || o.Fixtures == "" {
		return errors.New("set tasks and fixtures in the config or pass --tasks and --fixtures")
	}
	return nil
}

func (l *Loaded) loadTasks(ctx context.Context, o Options) error {
	fixtures, err := task.LoadFixtures(o.Fixtures)
	if err != nil {
		return err
	}
	l.Tasks, err = task.Load(o.Tasks, task.LoadOptions{Fixtures: fixtures, SkipBad: true, Check: reward.CheckTask})
	var skip *task.SkipError
	if errors.As(err, &skip) {
		if !o.SkipBad {
			return skip.Listed(o.Tasks)
		}
		l.Skipped = skip.Skipped
		fmt.Fprintf(writer(o.Warn), "warning: --skip-bad-tasks: %v\n", err)
	} else if err != nil {
		return err
	}
	if len(l.Tasks) == 0 {
		return fmt.Errorf("%s: no usable tasks", o.Tasks)
	}
	names := make([]string, len(l.Tasks))
	for i, t := range l.Tasks {
		if t.Fixture == "" {
			return fmt.Errorf("%s: task %q names no fixture to run its tools against", o.Tasks, t.ID)
		}
		names[i] = t.Fixture
	}
	l.factories = sandbox.NewFactories(fixtures, sandbox.Options{DSN: o.DSN})
	if l.Sandboxes, err = l.factories.Start(ctx, names); err != nil {
		l.Close()
		return err
	}
	return nil
}

// Jobs pairs every task with its fixture's sandbox factory, in order: one
// rollout job per task.
func (l *Loaded) Jobs() []rollout.Job {
	jobs := make([]rollout.Job, len(l.Tasks))
	for i := range l.Tasks {
		jobs[i] = rollout.Job{Task: &l.Tasks[i], Factory: l.Sandboxes[l.Tasks[i].Fixture]}
	}
	return jobs
}

// WriteSkipped writes the skipped task lines to outputDir/skipped_tasks.txt
// (nothing when none were skipped).
func (l *Loaded) WriteSkipped(outputDir string) error {
	return task.WriteSkipped(outputDir, l.Skipped, len(l.Tasks))
}

// Close closes the sandbox factories.
func (l *Loaded) Close() error {
	if l.factories == nil {
		return nil
	}
	return l.factories.Close()
}

func writer(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
