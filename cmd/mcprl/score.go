package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// scoreOptions are the flags of `mcprl score`.
type scoreOptions struct {
	rewards     string
	tasks       string
	completions string
	fixtures    string
	dsn         string
	workers     int
	mcpConfig   string
	output      string
}

func newScoreCmd() *cobra.Command {
	var o scoreOptions
	cmd := &cobra.Command{
		Use:   "score --reward NAME[,NAME...] --completions FILE [--tasks FILE] [--fixtures DIR] [--dsn DSN] [--workers N]",
		Short: "Score completions with reward functions, one JSON line per completion",
		Long: `score reads completions as JSONL, {"task_id": "...", "completion": "..."} per line (the completion is the
assistant's text, tool-call tags included), scores each with the named rewards and writes one JSON line per
completion, in input order:
  {"index": I, "task_id": "...", "reward": R, "breakdown": {"NAME": {"weight": W, "score": S, "reason": ..., "checks": [...]}}}
Several rewards are summed with their weights: --reward format:0.3,tool_selection:0.3,execution:0.4,hallucination:0.5
(NAME alone weighs 1). A bad line is reported on stderr with its line number and written as
{"index": I, "line": N, "reward": null, "error": "..."}; the run goes on.

Rewards that read tool results or the database ("assertions", "execution", "verifiable") run each completion's
tool calls, in order, in a fresh fork of its task's sandbox (--tasks and --fixtures needed; --dsn for
PostgreSQL, embedded SQLite otherwise), then check against that fork. "compute_mcp_reward" (the user's function; "seed" is
accepted for it) needs neither and is fast.

Rewards: ` + rewardList() + `

Example:
  mcprl score --reward compute_mcp_reward --completions completions.jsonl
  mcprl score --reward verifiable --tasks examples/customers/tasks.jsonl --fixtures examples/fixtures --completions c.jsonl`,
		Args: cobra.NoArgs,
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
	f.StringVar(&o.rewards, "reward", reward.MCPRewardName, "comma-separated rewards, each NAME or NAME:WEIGHT")
	f.StringVar(&o.tasks, "tasks", "", "tasks JSONL (task_id lookup: assertions, per-task settings)")
	f.StringVar(&o.completions, "completions", "", `completions JSONL, {"task_id", "completion"} per line ("-" for stdin)`)
	f.StringVar(&o.fixtures, "fixtures", "", "directory of fixture directories (for rewards that run tool calls)")
	f.StringVar(&o.dsn, "dsn", "", "PostgreSQL DSN for sandboxes (default: embedded SQLite)")
	f.IntVar(&o.workers, "workers", 0, "completions scored in parallel (default: number of CPUs)")
	f.StringVar(&o.mcpConfig, "mcp-reward-config", "", `JSON file of compute_mcp_reward settings: {"default": {"catalog": [...], "keyword": "..."}, "tasks": {"ID": {...}}}`)
	f.StringVar(&o.mcpConfig, "seed-config", "", "former name of --mcp-reward-config")
	_ = f.MarkDeprecated("seed-config", "use --mcp-reward-config")
	f.StringVarP(&o.output, "output", "o", "", "write the scores to this file instead of stdout")
	_ = cmd.MarkFlagRequired("completions")
	return cmd
}

func rewardList() string {
	r := reward.NewRegistry()
	var b bytes.Buffer
	for _, n := range r.Names() {
		fmt.Fprintf(&b, "\n  %-15s %s", n, r.Doc(n))
	}
	return b.String()
}

func runScore(ctx context.Context, o scoreOptions, stdout, stderr io.Writer) error {
	fn, err := reward.NewRegistry().Parse(o.rewards)
	if err != nil {
		return err
	}
	sc := &reward.Completions{Func: fn, Tasks: map[string]*task.Task{}, Workers: o.workers}
	fixtures := map[string]*task.Fixture{}
	if o.fixtures != "" {
		if fixtures, err = task.LoadFixtures(o.fixtures); err != nil {
			return err
		}
	}
	if o.tasks != "" {
		ts, err := task.Load(o.tasks, task.LoadOptions{Fixtures: fixtures, Check: reward.CheckTask})
		if err != nil {
			return err
		}
		for i := range ts {
			t := &ts[i]
			if t.ID == "" {
				t.ID = strconv.Itoa(i + 1)
			}
			sc.Tasks[t.ID] = t
		}
	}
	if o.mcpConfig != "" {
		sf, err := reward.ReadMCPRewardFile(o.mcpConfig)
		if err != nil {
			return err
		}
		if err := sf.Apply(fn); err != nil {
			return fmt.Errorf("--mcp-reward-config: %w", err)
		}
	}
	if reward.NeedsSandbox(fn) {
		if o.tasks == "" || o.fixtures == "" {
			return fmt.Errorf("reward %q runs tool calls against the task's sandbox: give --tasks and --fixtures", o.rewards)
		}
		fs := sandbox.NewFactories(fixtures, sandbox.Options{DSN: o.dsn})
		defer fs.Close()
		sc.Fork = func(ctx context.Context, t *task.Task) (reward.LiveSandbox, error) { return fs.Fork(ctx, t) }
	}
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
