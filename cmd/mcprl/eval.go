package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/report"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/train"
)

func newEvalCmd() *cobra.Command {
	var (
		flags             runFlags
		served            openai.Served
		k, samples, batch int
		asJSON, golden    bool
		sf                *samplingFlags
	)
	cmd := command("eval", func(cmd *cobra.Command, _ []string) error {
		ctx, stderr, fl := cmd.Context(), cmd.ErrOrStderr(), cmd.Flags()
		// The settings: a config's, else those a model was trained with (a
		// model GRPO trained samples as it was trained); flags win over both.
		// A train config's output_dir is where training writes, not eval:
		// only --output-dir is.
		var base *sampling.Settings
		in, trainedDir, seed := flags.over.Inputs, "", sf.seed
		if flags.config != "" {
			cfg, err := train.LoadConfig(flags.config, grpo.Load, flags.over, stderr)
			if err != nil {
				return err
			}
			in, base = cfg.Inputs, cfg.Sampling()
			if !fl.Changed("seed") {
				seed = cfg.Seed
			}
		} else if flags.over.Model != "" && !golden && !served.Given() {
			trainedDir = flags.over.Model
		}
		from, err := sf.resolve(base, trainedDir)
		if err != nil {
			return err
		}
		ecfg := eval.ConfigOf(&sf.Settings, seed)
		ecfg.BatchSize = batch
		if err := ecfg.Count(k, samples); err != nil {
			return err
		}
		if in.Fixtures == "" {
			in.Fixtures = "examples/fixtures"
		}
		if in.Tasks == "" {
			return errors.New("--tasks is required")
		}
		if served.Given() && (golden || flags.over.Model != "") {
			return errors.New("give one policy: --policy (a served model), --model or --golden")
		}
		ws, err := loadFor(cmd, &served, in.OnePhase(), golden && flags.over.Model == "", flags.skipBadTasks)
		if err != nil {
			return err
		}
		defer ws.Close()
		var ev *eval.Evaluator
		if golden {
			ev, err = eval.OpenGolden(ws, ecfg, fl.Changed("max-completion-length"), stderr)
		} else {
			sf.print(stderr, "eval", from) // after the engine line, which loading the model prints
			ev, err = eval.Open(ctx, &served, ws, ecfg, stderr)
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
		return errors.Join(rep.Write(cmd.OutOrStdout(), asJSON), eval.AllFailed(res, rep))
	})
	fl := cmd.Flags()
	fl.StringVar(&flags.config, "config", "", "train config (YAML) to read model, tasks, fixtures, dsn and generation settings from (optional)")
	flags.registerInputs(fl, "HF-format model directory with tokenizer files (the policy to evaluate; default fixtures: examples/fixtures)")
	fl.StringVar(&flags.over.OutputDir, "output-dir", "", "save trajectories.jsonl, report.json and report.html here")
	fl.IntVar(&k, "k", 1, "pass@k's k; also the samples per task unless --samples is given")
	fl.IntVar(&samples, "samples", 0, "trajectories per task, n >= k (default: k)")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object instead of the table")
	sf = registerSampling(fl, sampling.Settings{Temperature: 1, TopP: 1, MaxCompletionLength: 512}, 42, true)
	fl.IntVar(&batch, "batch-size", 32, "trajectories sampled together (whole tasks); results depend on it")
	fl.BoolVar(&golden, "golden", false, "replay each task's golden trajectory instead of sampling the model")
	registerServed(fl, &served)
	return cmd
}

func newReportCmd() *cobra.Command {
	var out string
	cmd := command("report", func(cmd *cobra.Command, dirs []string) error {
		warnings, err := report.Generate(out, dirs...)
		for _, w := range warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "report: skipped %s\n", w)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "report: %s\n", out)
		return nil
	})
	cmd.Args = cobra.MinimumNArgs(1)
	cmd.Flags().StringVar(&out, "out", "", "the HTML file to write")
	required(cmd, "out")
	return cmd
}
