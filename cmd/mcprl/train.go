package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/train"
)

func newTrainCmd() *cobra.Command {
	var (
		flags  runFlags
		resume bool
	)
	cmd := &cobra.Command{
		Use:   "train --config FILE [--model DIR] [--tasks FILE] [--fixtures DIR] [--output-dir DIR] [--resume]",
		Short: "Train a policy with GRPO against live MCP sandboxes",
		Long:  help("train"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			stderr := cmd.ErrOrStderr()
			cfg, err := train.LoadConfig(flags.config, grpo.Load, flags.over, stderr)
			if err != nil {
				return err
			}
			if cfg.Engine, err = engineOf(cmd, cfg.Engine); err != nil {
				return err
			}
			lock, ckpt, err := train.ClaimOutputDir(cfg.OutputDir, resume, flags.overwrite)
			if err != nil {
				return err
			}
			defer lock.Release()
			in := cfg.Inputs
			if ckpt != "" {
				in.Model = ckpt
			}
			ws, err := inputs.Load(ctx, inputs.Options{Inputs: in, SkipBad: flags.skipBadTasks, Warn: stderr})
			if err != nil {
				return err
			}
			defer ws.Close()
			if ckpt != "" {
				fmt.Fprintf(stderr, "resuming from %s\n", ckpt) // after the engine line
			}
			t, err := grpo.NewTrainer(cfg, flags.config, ws, stderr)
			if err != nil {
				return err
			}
			if err := t.Train(ctx, resume); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "trained %s: metrics in %s/metrics.jsonl, model in %s/final\n", cfg.Model, cfg.OutputDir, cfg.OutputDir)
			return nil
		},
	}
	flags.register(cmd)
	cmd.Flags().BoolVar(&resume, "resume", false, "continue from the newest complete checkpoint in output_dir")
	cmd.Flags().StringVar((*string)(&flags.over.SamplingEngine), "sampling-engine", "", "the engine rollouts sample on, a copy of the weights refreshed after optimizer steps: "+model.Engines+" (default: the config's sampling_engine, else the training engine)")
	return cmd
}
