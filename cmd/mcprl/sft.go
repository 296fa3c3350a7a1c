package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/sft"
	"github.com/mcprl/mcprl/train"
)

func newSFTCmd() *cobra.Command {
	var flags runFlags
	cmd := &cobra.Command{
		Use:   "sft --config FILE [--model DIR] [--tasks FILE] [--fixtures DIR] [--output-dir DIR]",
		Short: "Supervised fine-tuning on golden trajectories (the baseline GRPO must beat)",
		Long:  help("sft"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			stderr := cmd.ErrOrStderr()
			cfg, err := train.LoadConfig(flags.config, sft.Load, flags.over, stderr)
			if err != nil {
				return err
			}
			engine, err := engineOf(cmd, cfg.Engine)
			if err != nil {
				return err
			}
			lock, _, err := train.ClaimOutputDir(cfg.OutputDir, false, flags.overwrite)
			if err != nil {
				return err
			}
			defer lock.Release()
			in := cfg.Inputs
			in.Engine = engine
			ws, err := inputs.Load(ctx, inputs.Options{Inputs: in, SkipBad: flags.skipBadTasks, Warn: stderr})
			if err != nil {
				return err
			}
			defer ws.Close()
			t, err := sft.NewTrainer(ctx, cfg, flags.config, ws, stderr)
			if err != nil {
				return err
			}
			if err := t.Train(ctx); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "fine-tuned on %d golden trajectories: model in %s/final\n", len(t.Examples), cfg.OutputDir)
			return nil
		},
	}
	flags.register(cmd)
	return cmd
}
