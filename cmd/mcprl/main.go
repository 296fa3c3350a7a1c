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
	train, sft, modelCmd, tasks, eval, generate, chatCmd := newTrainCmd(), newSFTCmd(), newModelCmd(), newTasksCmd(), newEvalCmd(), newGenerateCmd(), newChatCmd()
	root := command("mcprl", nil, newTokenizeCmd(), newTokenizerCmd(), newScoreCmd(), newSandboxCmd(), train, sft, modelCmd, tasks, eval,
		generate, chatCmd, newEnvCmd(), newReportCmd())
	root.SilenceUsage, root.SilenceErrors, root.Version = true, true, buildinfo.String()
	root.SetVersionTemplate("mcprl {{.Version}}\n")
	// The commands that run a model take --engine (model info, forward, generate, init, merge, export and import
	// through model; tasks distill with an in-process teacher).
	distill, _, _ := tasks.Find([]string{"distill"})
	addEngineFlag(train, sft, modelCmd, distill, eval, generate, chatCmd)
	return root
}

// helpFiles holds each command's help as text, help/NAME.txt, where NAME is
// the command's path below mcprl joined by "-" (help/mcprl.txt for mcprl
// itself): documentation, read and reviewed as text.
//
//go:embed help/*.txt
var helpFiles embed.FS

// command returns the command named name with its help from help/NAME.txt:
// the file's first line is its usage (cobra's Use), the second its short
// description and, after a blank line, the rest its long help. It runs run
// and takes no positional arguments (callers set Args otherwise); with a nil
// run it is a group of the subcommands subs.
func command(name string, run func(*cobra.Command, []string) error, subs ...*cobra.Command) *cobra.Command {
	b, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic(err) // every file is embedded at build time; TestHelpFromFiles checks each command's
	}
	use, rest, _ := strings.Cut(string(b), "\n")
	short, long, _ := strings.Cut(rest, "\n\n")
	cmd := &cobra.Command{Use: use, Short: short, Long: strings.TrimSuffix(long, "\n"), RunE: run}
	if run != nil {
		cmd.Args = cobra.NoArgs
	}
	cmd.AddCommand(subs...)
	return cmd
}

// required marks the named flags of cmd required: cobra refuses to run it
// without them and names those missing.
func required(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		if err := cmd.MarkFlagRequired(n); err != nil {
			panic(err) // a flag that was never registered
		}
	}
}
