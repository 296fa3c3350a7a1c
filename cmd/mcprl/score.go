package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/reward"
)

// rewardsHelp marks where score's help lists the rewards (reward.Registry.Help).
const rewardsHelp = "{{rewards}}"

func newScoreCmd() *cobra.Command {
	var (
		c                   reward.ScoringConfig
		completions, output string
	)
	cmd := command("score", func(cmd *cobra.Command, _ []string) error {
		out := cmd.OutOrStdout()
		if output != "" && output != "-" {
			f, err := os.Create(output)
			if err != nil {
				return err
			}
			defer f.Close()
			out = f
		}
		return c.ScoreFile(cmd.Context(), completions, cmd.InOrStdin(), out, cmd.ErrOrStderr())
	})
	cmd.Long = strings.Replace(cmd.Long, rewardsHelp, reward.NewRegistry().Help(), 1)
	f := cmd.Flags()
	f.StringVar(&c.Rewards, "reward", reward.MCPRewardName, "comma-separated rewards, each NAME or NAME:WEIGHT")
	f.StringVar(&c.TasksPath, "tasks", "", "tasks JSONL (task_id lookup: assertions, per-task settings)")
	f.StringVar(&completions, "completions", "", `completions JSONL, {"task_id", "completion"} per line ("-" for stdin)`)
	f.StringVar(&c.FixturesDir, "fixtures", "", "directory of fixture directories (for rewards that run tool calls)")
	f.StringVar(&c.DSN, "dsn", "", "PostgreSQL DSN for sandboxes (default: embedded SQLite)")
	f.IntVar(&c.Workers, "workers", 0, "completions scored in parallel (default: number of CPUs)")
	f.StringVar(&c.MCPRewardConfig, "mcp-reward-config", "", `JSON file of compute_mcp_reward settings: {"default": {"catalog": [...], "keyword": "..."}, "tasks": {"ID": {...}}}`)
	f.StringVar(&c.MCPRewardConfig, "seed-config", "", "former name of --mcp-reward-config")
	_ = f.MarkDeprecated("seed-config", "use --mcp-reward-config")
	f.StringVarP(&output, "output", "o", "", "write the scores to this file instead of stdout")
	required(cmd, "completions")
	return cmd
}
