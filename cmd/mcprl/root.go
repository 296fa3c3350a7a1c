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
	train, sft, modelCmd, tasks, eval, generate, chatCmd := newTrainCmd(), newSFTCmd(), newModelCmd(), newTasksCmd(), newEvalCmd(), newGenerateCmd(), newChatCmd()
	root.AddCommand(newTokenizeCmd(), newTokenizerCmd(), newScoreCmd(), newSandboxCmd(), train, sft, modelCmd, tasks, eval, generate, chatCmd,
		newEnvCmd(), newReportCmd())
	// The commands that run a model take --engine (model info, forward, generate, init, merge, export and import
	// through model; tasks distill with an in-process teacher).
	distill, _, _ := tasks.Find([]string{"distill"})
	addEngineFlag(train, sft, modelCmd, distill, eval, generate, chatCmd)
	return root
}
