package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/report"
)

func newReportCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR [RUN_DIR...] --out FILE.html",
		Short: "Write one self-contained HTML page of runs: curves, evaluation tables, sampled trajectories",
		Long: `report reads the run folders that mcprl train, sft and eval write and draws them in one HTML file that
opens from disk with nothing loaded from the network:

  - a chart per metric of metrics.jsonl (reward and each reward function, loss, grad_norm, KL, clip ratios,
    completion lengths and the truncated share, tool calls, success and parse errors, per tool, the
    learning rate), raw and smoothed, with several runs overlaid;
  - the evaluation tables (success, pass@k, self-correction, per category) of any folder holding an
    mcprl eval report.json: the run folder itself or one directly under it;
  - a browser of the trajectories sampled at logging steps (completions.jsonl) and of an evaluation's
    trajectories: each group side by side, with tool calls, results, rewards and advantages.

Example:
  mcprl report runs/experiment/sft runs/experiment/grpo --out runs/experiment/report.html`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			warnings, err := report.Generate(out, dirs...)
			for _, w := range warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "report: skipped %s\n", w)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "report: %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the HTML file to write")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}
