package main

import (
	"bytes"
	"errors"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/train"
)

// evalFlags are eval's own knobs beyond the shared runFlags.
type evalFlags struct {
	k, samples, batch int
	json, golden      bool
	sf                *samplingFlags
}

func newEvalCmd() *cobra.Command {
	var (
		flags  runFlags
		ef     evalFlags
		served openai.Served
	)
	cmd := &cobra.Command{
		Use:   "eval (--model DIR | --policy URL --served-model NAME | --golden) --tasks FILE [--fixtures DIR] [--k K] [--json] [--seed S] [--temperature T] [--dsn DSN] [--output-dir DIR]",
		Short: "Evaluate a policy on tasks in live sandboxes: success rate, pass@k, tool use, self-correction",
		Long:  help("eval"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(cmd, &flags, &ef, &served)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&flags.config, "config", "", "train config (YAML) to read model, tasks, fixtures, dsn and generation settings from (optional)")
	fl.StringVar(&flags.over.Model, "model", "", "HF-format model directory with tokenizer files (the policy to evaluate)")
	fl.StringVar(&flags.over.Tasks, "tasks", "", "tasks JSONL file to evaluate on")
	fl.StringVar(&flags.over.Fixtures, "fixtures", "", "directory of fixtures, each named by a task's \"fixture\" (default: the config's, else examples/fixtures)")
	fl.StringVar(&flags.over.OutputDir, "output-dir", "", "save trajectories.jsonl, report.json and report.html here")
	fl.StringVar(&flags.over.DSN, "dsn", "", "PostgreSQL DSN for the sandboxes' databases (default: embedded SQLite)")
	fl.IntVar(&ef.k, "k", 1, "pass@k's k; also the samples per task unless --samples is given")
	fl.IntVar(&ef.samples, "samples", 0, "trajectories per task, n >= k (default: k)")
	fl.BoolVar(&ef.json, "json", false, "print one JSON object instead of the table")
	ef.sf = registerSampling(fl, sampling.Settings{Temperature: 1, TopP: 1, MaxCompletionLength: 512}, 42, true)
	fl.IntVar(&ef.batch, "batch-size", 32, "trajectories sampled together (whole tasks); results depend on it")
	fl.BoolVar(&ef.golden, "golden", false, "replay each task's golden trajectory instead of sampling the model")
	fl.BoolVar(&flags.skipBadTasks, "skip-bad-tasks", false, "skip bad lines of the tasks file (listed and counted) instead of failing")
	registerServed(fl, &served)
	return cmd
}

func runEval(cmd *cobra.Command, flags *runFlags, ef *evalFlags, served *openai.Served) error {
	ctx, stderr, fl := cmd.Context(), cmd.ErrOrStderr(), cmd.Flags()
	// The settings: a config's, else those a model was trained with (a
	// model GRPO trained samples as it was trained); flags win over both. A
	// train config's output_dir is where training writes, not eval: only
	// --output-dir is.
	var base *sampling.Settings
	in, trainedDir, seed := flags.over.Inputs, "", ef.sf.seed
	if flags.config != "" {
		cfg, err := train.LoadConfig(flags.config, grpo.Load, flags.over, stderr)
		if err != nil {
			return err
		}
		in, base = cfg.Inputs, cfg.Sampling()
		if !fl.Changed("seed") {
			seed = cfg.Seed
		}
	} else if flags.over.Model != "" && !ef.golden && !served.Given() {
		trainedDir = flags.over.Model
	}
	from, err := ef.sf.resolve(base, trainedDir)
	if err != nil {
		return err
	}
	var notes bytes.Buffer // printed after the engine line, which loading the model prints first
	if !ef.golden {
		ef.sf.print(&notes, "eval", from)
	}
	ecfg := eval.ConfigOf(&ef.sf.Settings, seed)
	ecfg.BatchSize = ef.batch
	if err := ecfg.Count(ef.k, ef.samples); err != nil {
		return err
	}
	if in.Fixtures == "" {
		in.Fixtures = "examples/fixtures"
	}
	if in.Tasks == "" {
		return errors.New("--tasks is required")
	}
	if served.Given() && (ef.golden || flags.over.Model != "") {
		return errors.New("give one policy: --policy (a served model), --model or --golden")
	}
	ws, err := loadFor(cmd, served, in.OnePhase(), ef.golden && flags.over.Model == "", flags.skipBadTasks)
	if err != nil {
		return err
	}
	defer ws.Close()
	if _, err := notes.WriteTo(stderr); err != nil {
		return err
	}
	var ev *eval.Evaluator
	if ef.golden {
		ev, err = eval.OpenGolden(ws, ecfg, fl.Changed("max-completion-length"), stderr)
	} else {
		ev, err = eval.Open(ctx, served, ws, ecfg, stderr)
	}
	if err != nil {
		return err
	}
	res, rep, err := ev.Evaluate(ctx, ws.Tasks)
	if err != nil {
		return err
	}
	if flags.over.OutputDir != "" {
		if err := eval.SaveWithPage(flags.over.OutputDir, res, rep, stderr); err != nil {
			return err
		}
	}
	return errors.Join(rep.Write(cmd.OutOrStdout(), ef.json), eval.AllFailed(res, rep))
}
