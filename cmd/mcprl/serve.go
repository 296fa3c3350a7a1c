package main

import (
	"errors"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/envserver"
	"github.com/mcprl/mcprl/internal/httpguard"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
)

func newSandboxCmd() *cobra.Command {
	return command("sandbox", nil, newSandboxServeCmd())
}

func newSandboxServeCmd() *cobra.Command {
	var (
		c        sandbox.ServeConfig
		tokenEnv string
		stdio    bool
	)
	cmd := command("sandbox-serve", func(cmd *cobra.Command, _ []string) error {
		if stdio == (c.HTTP != "") {
			return errors.New("give exactly one of --stdio or --http ADDR")
		}
		if stdio && tokenEnv != "" {
			return errors.New("--token-env guards --http only")
		}
		var err error
		if c.Token, err = httpguard.TokenFromEnv(tokenEnv); err != nil {
			return err
		}
		c.Log = cmd.ErrOrStderr()
		return sandbox.ServeFixture(cmd.Context(), c)
	})
	fl := cmd.Flags()
	fl.StringVar(&c.Fixture, "fixture", "", "fixture directory (schema.sql, data.sql, workspace/, sandbox.yaml), e.g. examples/fixtures/customers")
	fl.BoolVar(&stdio, "stdio", false, "serve one MCP client on stdin/stdout")
	fl.StringVar(&c.HTTP, "http", "", "serve MCP streamable HTTP on [HOST:]PORT (no host: 127.0.0.1)")
	fl.StringVar(&c.DSN, "dsn", "", `PostgreSQL DSN (postgres://user:pass@host/db); empty uses embedded SQLite`)
	fl.DurationVar(&c.CallTimeout, "call-timeout", sandbox.DefaultCallTimeout, "longest time one tool call may take")
	fl.StringVar(&tokenEnv, "token-env", "", "with --http: require the bearer token held by this environment variable")
	fl.DurationVar(&c.SessionTimeout, "session-timeout", sandbox.DefaultSessionTimeout, "with --http: close a session (and drop its database fork) after this long without a request")
	fl.IntVar(&c.MaxSessions, "max-sessions", sandbox.DefaultMaxSessions, "with --http: most MCP sessions open at once")
	fl.BoolVarP(&c.Verbose, "verbose", "v", false, "log MCP SDK diagnostics to stderr")
	required(cmd, "fixture")
	return cmd
}

func newEnvCmd() *cobra.Command {
	return command("env", nil, newEnvServeCmd())
}

func newEnvServeCmd() *cobra.Command {
	var (
		c        envserver.ServeConfig
		tokenEnv string
	)
	cmd := command("env-serve", func(cmd *cobra.Command, _ []string) error {
		var err error
		if c.Token, err = httpguard.TokenFromEnv(tokenEnv); err != nil {
			return err
		}
		c.Log = cmd.ErrOrStderr()
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return envserver.ListenAndServe(ctx, c)
	})
	f := cmd.Flags()
	f.StringVar(&c.FixturesDir, "fixtures", "", "directory of fixture directories (schema.sql, data.sql, workspace/, sandbox.yaml), e.g. examples/fixtures")
	f.StringVar(&c.TasksPath, "tasks", "", "tasks JSONL a reset may name by id (a reset may also give the task inline)")
	f.StringVar(&c.DSN, "dsn", "", "PostgreSQL DSN (postgres://user:pass@host/db); empty uses embedded SQLite")
	f.StringVar(&c.Rewards, "rewards", envserver.DefaultRewards, "reward of a finished episode: comma-separated NAME or NAME:WEIGHT of "+fmt.Sprint(reward.NewRegistry().Names())+"; the seed reward is always reported too")
	f.StringVar(&c.Listen, "listen", "127.0.0.1:8000", "[HOST:]PORT to listen on (no host: 127.0.0.1; another host prints a warning, give --token-env there)")
	f.StringVar(&tokenEnv, "token-env", "", "require the bearer token held by this environment variable on every request (Authorization: Bearer ...)")
	f.IntVar(&c.MaxSessions, "max-sessions", envserver.DefaultMaxSessions, "most concurrent sessions; more get CAPACITY_REACHED")
	f.DurationVar(&c.IdleTimeout, "idle-timeout", envserver.DefaultIdleTimeout, "free a session (its fork and connection) after this long without a message")
	f.DurationVar(&c.CallTimeout, "call-timeout", sandbox.DefaultCallTimeout, "longest time one tool call may take")
	f.Int64Var(&c.MaxMessageBytes, "max-message-bytes", envserver.DefaultMaxMessageBytes, "largest message accepted")
	f.IntVar(&c.MaxReplayCalls, "max-replay-calls", envserver.DefaultMaxReplayCalls, "most tool calls a finish with replay runs; the rest are not run and the episode is scored as truncated")
	f.IntVar(&c.MaxAssertions, "max-assertions", envserver.DefaultMaxAssertions, "most ground_truth_assertions a task given inline at reset may have")
	f.DurationVar(&c.FinishTimeout, "finish-timeout", envserver.DefaultFinishTimeout, "longest time a finish (its replayed calls and scoring) may take")
	f.IntVar(&c.MaxConnections, "max-connections", 0, "most HTTP connections open at once, WebSockets included (0: --max-sessions + 256); more wait to be accepted")
	f.BoolVarP(&c.Verbose, "verbose", "v", false, "log sessions freed and other diagnostics to stderr")
	required(cmd, "fixtures")
	return cmd
}
