package main

import (
	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/internal/buildinfo"
)

// newRootCmd builds the mcprl command tree. Each subcommand lives in its own
// file of this package and is added here.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "mcprl",
		Short:         "Reinforcement learning (GRPO) for MCP tool calling",
		Long:          "mcprl trains an LLM agent to call Model Context Protocol tools well: it samples N trajectories per task,\nruns every tool call against a live MCP sandbox, scores each with a verifiable reward and updates the policy\nrelative to its group's mean (GRPO).",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.String(),
	}
	root.SetVersionTemplate("mcprl {{.Version}}\n")
	root.AddCommand(newTokenizeCmd())
	root.AddCommand(newTokenizerCmd())
	root.AddCommand(newScoreCmd())
	root.AddCommand(newSandboxCmd())
	root.AddCommand(newTrainCmd())
	root.AddCommand(newSFTCmd())
	root.AddCommand(newModelCmd())
	root.AddCommand(newTasksCmd())
	root.AddCommand(newEvalCmd())
	root.AddCommand(newGenerateCmd())
	root.AddCommand(newChatCmd())
	root.AddCommand(newEnvCmd())
	root.AddCommand(newReportCmd())
	return root
}
