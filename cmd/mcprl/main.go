// Command mcprl trains LLM agents to call Model Context Protocol tools with
// reinforcement learning (GRPO) against a live MCP sandbox.
package main

import (
	"context"
	"embed"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "mcprl:", err)
		os.Exit(1)
	}
}

// newRootCmd builds the mcprl command tree. Each subcommand lives in its own
// file of this package and is added here.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "mcprl",
		Short:         "Reinforcement learning (GRPO) for MCP tool calling",
		Long:          help("mcprl"),
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

// helpFiles holds each command's long help as text, help/NAME.txt, where
// NAME is the command's path below mcprl joined by "-" (help/mcprl.txt for
// mcprl itself): documentation, read and reviewed as text.
//
//go:embed help/*.txt
var helpFiles embed.FS

// help returns the long help of the command named name: help/NAME.txt
// without its final newline.
func help(name string) string {
	b, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic(err) // every file is embedded at build time; TestHelpFromFiles checks each command's
	}
	return strings.TrimSuffix(string(b), "\n")
}
