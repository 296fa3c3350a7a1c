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
		Long:  help("report"),
		Args:  cobra.MinimumNArgs(1),
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
