package main

import (
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/envserver"
	"github.com/mcprl/mcprl/internal/httpguard"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

func newEnvCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Serve the live sandboxes as an environment for other trainers (TRL, verl, OpenEnv)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newEnvServeCmd())
	return cmd
}

func newEnvServeCmd() *cobra.Command {
	var (
		fixtures, tasksPath, dsn, rewards, listen, tokenEnv string
		opts                                                envserver.Options
		verbose                                             bool
		maxConns                                            int
	)
	cmd := &cobra.Command{
		Use:   "serve --fixtures DIR --tasks FILE [--dsn DSN] [--rewards NAMES] [--listen ADDR]",
		Short: "Serve sandboxes over OpenEnv's protocol: a fork per episode, tool calls, rewards",
		Long: `serve speaks OpenEnv's environment protocol, so OpenEnv's EnvClient and MCPToolClient, TRL's
GRPOTrainer (environment_factory, with the mcprl_env Python package) and verl's tool agent loop
run their tool calls in mcprl's sandboxes:

  WebSocket /ws   one connection = one session; {"type": "reset"|"step"|"state"|"close"|"mcp", "data": ...}
                  reset {"task_id": ID} or the task inline -> system prompt, task, tools' JSON schemas;
                  step {"type": "call_tool", "tool_name", "arguments"} -> the tool's result as rollouts see it;
                  step {"type": "finish", "completion"} -> done, with the reward; state -> the reward so far
  POST /mcp       JSON-RPC tools/list, tools/call (a fork per call, or a session's), openenv/session/create|close
  GET /health (without the token, for liveness probes), /schema, /metadata, /stats

Every episode runs in its own copy-on-write fork of its task's fixture (SQLite, or PostgreSQL with --dsn),
with the same confinement as training. Sessions idle for --idle-timeout are freed; SIGTERM or Ctrl-C closes
every session and fork before exiting.

Example:
  mcprl env serve --fixtures examples/fixtures --tasks examples/customers/tasks.jsonl --listen 127.0.0.1:8000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := httpguard.TokenFromEnv(tokenEnv)
			if err != nil {
				return err
			}
			fxs, err := task.LoadFixtures(fixtures)
			if err != nil {
				return err
			}
			if tasksPath != "" {
				if opts.Tasks, err = task.Load(tasksPath, task.LoadOptions{Fixtures: fxs, Check: reward.CheckTask}); err != nil {
					return err
				}
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			opts.Fixtures, opts.DSN, opts.Rewards = fxs, dsn, rewards
			opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			srv, err := envserver.New(ctx, opts)
			if err != nil {
				return err
			}
			l, err := httpguard.Listen(listen, token != "", cmd.ErrOrStderr())
			if err != nil {
				srv.Close()
				return err
			}
			if maxConns <= 0 {
				maxConns = envserver.DefaultMaxSessions + 256
				if opts.MaxSessions > 0 {
					maxConns = opts.MaxSessions + 256
				}
			}
			l = httpguard.LimitListener(l, maxConns)
			fmt.Fprintf(cmd.ErrOrStderr(), "mcprl: environment server at http://%s/ (fixtures %s, %d tasks, rewards %s)\n",
				l.Addr(), fixtures, len(opts.Tasks), rewards)
			err = httpguard.Serve(ctx, l, httpguard.Bearer(token, srv.Handler(), "/health"), 10*time.Second, opts.Logger)
			st := srv.Stats()
			cerr := srv.Close()
			fmt.Fprintf(cmd.ErrOrStderr(), "mcprl: environment server stopped: %d sessions and %d forks closed, %d tool calls served\n",
				st.ActiveSessions, st.OpenForks, st.ToolCalls)
			if err != nil {
				return err
			}
			return cerr
		},
	}
	f := cmd.Flags()
	f.StringVar(&fixtures, "fixtures", "", "directory of fixture directories (schema.sql, data.sql, workspace/, sandbox.yaml), e.g. examples/fixtures")
	f.StringVar(&tasksPath, "tasks", "", "tasks JSONL a reset may name by id (a reset may also give the task inline)")
	f.StringVar(&dsn, "dsn", "", "PostgreSQL DSN (postgres://user:pass@host/db); empty uses embedded SQLite")
	f.StringVar(&rewards, "rewards", envserver.DefaultRewards, "reward of a finished episode: comma-separated NAME or NAME:WEIGHT of "+fmt.Sprint(reward.NewRegistry().Names())+"; the seed reward is always reported too")
	f.StringVar(&listen, "listen", "127.0.0.1:8000", "[HOST:]PORT to listen on (no host: 127.0.0.1; another host prints a warning, give --token-env there)")
	f.StringVar(&tokenEnv, "token-env", "", "require the bearer token held by this environment variable on every request (Authorization: Bearer ...)")
	f.IntVar(&opts.MaxSessions, "max-sessions", envserver.DefaultMaxSessions, "most concurrent sessions; more get CAPACITY_REACHED")
	f.DurationVar(&opts.IdleTimeout, "idle-timeout", envserver.DefaultIdleTimeout, "free a session (its fork and connection) after this long without a message")
	f.DurationVar(&opts.CallTimeout, "call-timeout", sandbox.DefaultCallTimeout, "longest time one tool call may take")
	f.Int64Var(&opts.MaxMessageBytes, "max-message-bytes", envserver.DefaultMaxMessageBytes, "largest message accepted")
	f.IntVar(&opts.MaxReplayCalls, "max-replay-calls", envserver.DefaultMaxReplayCalls, "most tool calls a finish with replay runs; the rest are not run and the episode is scored as truncated")
	f.IntVar(&opts.MaxAssertions, "max-assertions", envserver.DefaultMaxAssertions, "most ground_truth_assertions a task given inline at reset may have")
	f.DurationVar(&opts.FinishTimeout, "finish-timeout", envserver.DefaultFinishTimeout, "longest time a finish (its replayed calls and scoring) may take")
	f.IntVar(&maxConns, "max-connections", 0, "most HTTP connections open at once, WebSockets included (0: --max-sessions + 256); more wait to be accepted")
	f.BoolVarP(&verbose, "verbose", "v", false, "log sessions freed and other diagnostics to stderr")
	_ = cmd.MarkFlagRequired("fixtures")
	return cmd
}
