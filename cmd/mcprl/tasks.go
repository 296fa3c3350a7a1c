package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/taskgen"
)

func newTasksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Work with task files (generate training tasks from a fixture, distill golden trajectories from a teacher)",
		Long:  help("tasks"),
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTasksGenerateCmd(), newTasksDistillCmd())
	return cmd
}

func newTasksGenerateCmd() *cobra.Command {
	var (
		fixture, out, dsn, systemPrompt string
		n                               int
		seed                            uint64
		inspectShare                    float64
	)
	cmd := &cobra.Command{
		Use:   "generate --fixture DIR --out FILE [--n N] [--seed S] [--dsn DSN]",
		Short: "Generate training tasks with assertions (and golden trajectories for the ordinary ones) from a fixture's live database",
		Long:  help("tasks-generate"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fixture == "" || out == "" {
				return fmt.Errorf("--fixture and --out are required")
			}
			fx, err := task.LoadFixture(fixture)
			if err != nil {
				return err
			}
			tasks, err := taskgen.Generate(cmd.Context(), fx, taskgen.Options{N: n, Seed: seed, DSN: dsn, InspectShare: &inspectShare, SystemPrompt: systemPrompt})
			if err != nil {
				return err
			}
			if err := task.WriteFile(out, tasks); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d tasks for fixture %s to %s:%s (--inspect-share %g)\n", len(tasks), fx.Name, out, taskgen.Count(tasks), inspectShare)
			if len(tasks) < n {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: the fixture offers only %d distinct questions (asked for %d)\n", len(tasks), n)
			}
			return nil
		},
	}
	cmd.Flags().Float64Var(&inspectShare, "inspect-share", taskgen.DefaultInspectShare, "share of the ordinary tasks whose golden looks (distinct values of the filtered column, or a few rows) before it queries")
	cmd.Flags().StringVar(&fixture, "fixture", "", "fixture directory (schema.sql, data.sql, sandbox.yaml), e.g. examples/fixtures/customers")
	cmd.Flags().StringVar(&out, "out", "", "JSONL file to write the tasks to")
	cmd.Flags().IntVar(&n, "n", taskgen.DefaultN, "number of tasks to generate")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed: the same seed gives the same tasks")
	cmd.Flags().StringVar(&systemPrompt, "system-prompt", "", "system prompt of every task (default none: the chat template renders the sandbox's tools/list)")
	cmd.Flags().StringVar(&dsn, "dsn", "", "PostgreSQL DSN to build the fixture in (default: embedded SQLite)")
	return cmd
}
