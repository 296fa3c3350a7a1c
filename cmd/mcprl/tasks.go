package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/distill"
	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/taskgen"
)

func newTasksCmd() *cobra.Command {
	return command("tasks", nil, newTasksGenerateCmd(), newTasksDistillCmd())
}

func newTasksGenerateCmd() *cobra.Command {
	var (
		fixture, out, dsn, systemPrompt   string
		n                                 int
		seed                              uint64
		inspectShare, lookupShare, tables float64
	)
	cmd := command("tasks-generate", func(cmd *cobra.Command, _ []string) error {
		fx, err := task.LoadFixture(fixture)
		if err != nil {
			return err
		}
		tasks, err := taskgen.Generate(cmd.Context(), fx, taskgen.Options{N: n, Seed: seed, DSN: dsn, InspectShare: &inspectShare, LookupShare: lookupShare, TablesShare: tables, SystemPrompt: systemPrompt})
		if err != nil {
			return err
		}
		if err := task.WriteFile(out, tasks); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d tasks for fixture %s to %s:%s (--inspect-share %g, --lookup-share %g, --tables-share %g)\n", len(tasks), fx.Name, out, taskgen.Count(tasks), inspectShare, lookupShare, tables)
		if len(tasks) < n {
			fmt.Fprintf(cmd.ErrOrStderr(), "note: the fixture offers only %d distinct questions (asked for %d)\n", len(tasks), n)
		}
		return nil
	})
	cmd.Flags().Float64Var(&inspectShare, "inspect-share", taskgen.DefaultInspectShare, "share of the ordinary tasks whose golden looks (distinct values of the filtered column, or a few rows) before it queries")
	cmd.Flags().Float64Var(&lookupShare, "lookup-share", 0, "share of the questions about one named row (the orders of the customer 'James Gosling') whose golden first finds the row's key, then queries by the key it read")
	cmd.Flags().Float64Var(&tables, "tables-share", 0, "share of the ordinary tasks whose golden first lists the database's tables (the look at a schema it has not seen)")
	cmd.Flags().StringVar(&fixture, "fixture", "", "fixture directory (schema.sql, data.sql, sandbox.yaml), e.g. examples/fixtures/customers")
	cmd.Flags().StringVar(&out, "out", "", "JSONL file to write the tasks to")
	cmd.Flags().IntVar(&n, "n", taskgen.DefaultN, "number of tasks to generate")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed: the same seed gives the same tasks")
	cmd.Flags().StringVar(&systemPrompt, "system-prompt", "", "system prompt of every task (default none: the chat template renders the sandbox's tools/list)")
	cmd.Flags().StringVar(&dsn, "dsn", "", "PostgreSQL DSN to build the fixture in (default: embedded SQLite)")
	required(cmd, "fixture", "out")
	return cmd
}

func newTasksDistillCmd() *cobra.Command {
	var (
		flags         runFlags
		served        openai.Served
		out           string
		k, perTask, b int
		sf            *samplingFlags
	)
	cmd := command("tasks-distill", func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		stderr := cmd.ErrOrStderr()
		if served.Given() == (flags.over.Model != "") {
			return errors.New("give the teacher: --policy URL --served-model NAME, or --model DIR")
		}
		if k < 1 {
			return fmt.Errorf("--k %d: need at least 1", k)
		}
		from, err := sf.resolve(nil, flags.over.Model)
		if err != nil {
			return err
		}
		ecfg := eval.ConfigOf(&sf.Settings, sf.seed)
		ecfg.Samples, ecfg.K, ecfg.BatchSize = k, 1, b
		ws, err := loadFor(cmd, &served, flags.over.Inputs, false, flags.skipBadTasks)
		if err != nil {
			return err
		}
		defer ws.Close()
		ev, err := eval.Open(ctx, &served, ws, ecfg, stderr)
		if err != nil {
			return err
		}
		sf.print(stderr, "distill", from)
		kept, st, err := distill.Run(ctx, ev, ws.Tasks, distill.Options{PerTask: perTask})
		if err != nil {
			return err
		}
		if err := task.WriteFile(out, kept); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "distill: %s\ndistill: wrote %d golden trajectories to %s\n", st, len(kept), out)
		return nil
	})
	fl := cmd.Flags()
	registerServed(fl, &served)
	flags.registerInputs(fl, "an in-process teacher: HF-format model directory (the tasks' ground_truth_assertions decide what is kept)")
	fl.StringVar(&out, "out", "", "write the tasks with their distilled golden trajectories here (JSONL)")
	fl.IntVar(&k, "k", 4, "trajectories sampled per task")
	fl.IntVar(&perTask, "per-task", 1, "distinct golden trajectories kept per task at most")
	sf = registerSampling(fl, sampling.Settings{Temperature: 0.7, TopP: 1, MaxCompletionLength: 1024}, 42, true)
	fl.IntVar(&b, "batch-size", 32, "trajectories sampled together (whole tasks)")
	required(cmd, "tasks", "fixtures", "out")
	return cmd
}
