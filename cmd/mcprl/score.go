package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/reward"
)

// scoreOptions are the flags of `mcprl score`.
type scoreOptions struct {
	reward.ScoringConfig
	completions, output string
}

// rewardsHelp marks where score's help lists the rewards (reward.Registry.Help).
const rewardsHelp = "{{rewards}}"

func newScoreCmd() *cobra.Command {
	var o scoreOptions
	cmd := &cobra.Command{
		Use:   "score --reward NAME[,NAME...] --completions FILE [--tasks FILE] [--fixtures DIR] [--dsn DSN] [--workers N]",
		Short: "Score completions with reward functions, one JSON line per completion",
		Long:  strings.Replace(help("score"), rewardsHelp, reward.NewRegistry().Help(), 1),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if o.output != "" && o.output != "-" {
				f, err := os.Create(o.output)
				if err != nil {
					return err
				}
				defer f.Close()
				out = f
			}
			return runScore(cmd.Context(), o, out, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Rewards, "reward", reward.MCPRewardName, "comma-separated rewards, each NAME or NAME:WEIGHT")
	f.StringVar(&o.TasksPath, "tasks", "", "tasks JSONL (task_id lookup: assertions, per-task settings)")
	f.StringVar(&o.completions, "completions", "", `completions JSONL, {"task_id", "completion"} per line ("-" for stdin)`)
	f.StringVar(&o.FixturesDir, "fixtures", "", "directory of fixture directories (for rewards that run tool calls)")
	f.StringVar(&o.DSN, "dsn", "", "PostgreSQL DSN for sandboxes (default: embedded SQLite)")
	f.IntVar(&o.Workers, "workers", 0, "completions scored in parallel (default: number of CPUs)")
	f.StringVar(&o.MCPRewardConfig, "mcp-reward-config", "", `JSON file of compute_mcp_reward settings: {"default": {"catalog": [...], "keyword": "..."}, "tasks": {"ID": {...}}}`)
	f.StringVar(&o.MCPRewardConfig, "seed-config", "", "former name of --mcp-reward-config")
	_ = f.MarkDeprecated("seed-config", "use --mcp-reward-config")
	f.StringVarP(&o.output, "output", "o", "", "write the scores to this file instead of stdout")
	_ = cmd.MarkFlagRequired("completions")
	return cmd
}

func runScore(ctx context.Context, o scoreOptions, stdout, stderr io.Writer) error {
	sc, err := reward.OpenCompletions(o.ScoringConfig)
	if err != nil {
		return err
	}
	defer sc.Close()
	in, name := io.Reader(os.Stdin), "stdin"
	if o.completions != "-" {
		f, err := os.Open(o.completions)
		if err != nil {
			return fmt.Errorf("read completions: %w", err)
		}
		defer f.Close()
		in, name = f, o.completions
	}
	return sc.Score(ctx, in, name, stdout, stderr)
}
