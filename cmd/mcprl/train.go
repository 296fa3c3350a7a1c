package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/rundir"
	"github.com/mcprl/mcprl/sft"
	"github.com/mcprl/mcprl/train"
)

func newTrainCmd() *cobra.Command {
	var (
		flags  runFlags
		resume bool
	)
	cmd := command("train", func(cmd *cobra.Command, _ []string) error {
		r, err := openRun(cmd, &flags, grpo.Load, resume)
		if err != nil {
			return err
		}
		defer r.close()
		t, err := grpo.NewTrainer(r.cfg, flags.config, r.ws, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		if err := t.Train(cmd.Context(), resume); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "trained %s: metrics in %s/metrics.jsonl, model in %s/final\n", r.cfg.Model, r.cfg.OutputDir, r.cfg.OutputDir)
		return nil
	})
	flags.register(cmd)
	cmd.Flags().BoolVar(&resume, "resume", false, "continue from the newest complete checkpoint in output_dir")
	cmd.Flags().StringVar((*string)(&flags.over.SamplingEngine), "sampling-engine", "", "the engine rollouts sample on, a copy of the weights refreshed after optimizer steps: "+model.Engines+" (default: the config's sampling_engine, else the training engine)")
	return cmd
}

func newSFTCmd() *cobra.Command {
	var flags runFlags
	cmd := command("sft", func(cmd *cobra.Command, _ []string) error {
		r, err := openRun(cmd, &flags, sft.Load, false)
		if err != nil {
			return err
		}
		defer r.close()
		t, err := sft.NewTrainer(cmd.Context(), r.cfg, flags.config, r.ws, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		if err := t.Train(cmd.Context()); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "fine-tuned on %d golden trajectories: model in %s/final\n", len(t.Examples), r.cfg.OutputDir)
		return nil
	})
	flags.register(cmd)
	return cmd
}

// run is a training run about to start: its config, its claimed output
// directory and its loaded inputs.
type run[C train.RunConfig] struct {
	cfg  C
	lock *rundir.Lock
	ws   *inputs.Loaded
}

// openRun loads --config with load (the flags over it, --engine over its
// engine), claims its output directory (resume: from the newest checkpoint
// there) and loads its inputs, the model from that checkpoint if there is
// one.
func openRun[C train.RunConfig](cmd *cobra.Command, flags *runFlags, load func(string) (C, error), resume bool) (*run[C], error) {
	stderr := cmd.ErrOrStderr()
	cfg, err := train.LoadConfig(flags.config, load, flags.over, stderr)
	if err != nil {
		return nil, err
	}
	args, in, _ := cfg.RunParts()
	if in.Engine, err = engineOf(cmd, in.Engine); err != nil {
		return nil, err
	}
	lock, ckpt, err := train.ClaimOutputDir(args.OutputDir, resume, flags.overwrite)
	if err != nil {
		return nil, err
	}
	loadIn := *in
	if ckpt != "" {
		loadIn.Model = ckpt
	}
	ws, err := inputs.Load(cmd.Context(), inputs.Options{Inputs: loadIn, SkipBad: flags.skipBadTasks, Warn: stderr})
	if err != nil {
		lock.Release()
		return nil, err
	}
	if ckpt != "" {
		fmt.Fprintf(stderr, "resuming from %s\n", ckpt) // after the engine line
	}
	return &run[C]{cfg: cfg, lock: lock, ws: ws}, nil
}

// close closes the run's inputs and releases its output directory.
func (r *run[C]) close() {
	r.ws.Close()
	r.lock.Release()
}
