package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/internal/httpguard"
	"github.com/mcprl/mcprl/sandbox"
)

func newSandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Work with a fixture's live MCP sandbox (query_database, run_linter, external MCP servers)",
		Long: `sandbox gives access to the MCP tool server that trajectories use during training and evaluation:
the fixture's database (embedded SQLite, or PostgreSQL with --dsn), its workspace for run_linter,
and the external MCP servers its sandbox.yaml names.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newSandboxServeCmd())
	return cmd
}

func newSandboxServeCmd() *cobra.Command {
	var (
		c        sandbox.ServeConfig
		tokenEnv string
		stdio    bool
	)
	cmd := &cobra.Command{
		Use:   "serve --fixture DIR (--stdio | --http [HOST:]PORT) [--dsn DSN] [--token-env VAR]",
		Short: "Serve a fixture's sandbox to any MCP client over stdio or streamable HTTP",
		Long: `serve builds the fixture's database once, forks it, and serves the sandbox's tools
(query_database {sql}, run_linter {path}, plus the tools of the fixture's external MCP servers)
with the official MCP Go SDK. Changes made through query_database live in a fork and are
dropped when its session ends; the fixture itself is never changed.

--stdio serves one client on stdin/stdout (logs go to stderr). --http serves MCP streamable
HTTP at http://HOST:PORT/ until interrupted: each MCP session gets its own database fork,
sessions idle for --session-timeout are closed, and at most --max-sessions are open at once.
--http PORT or :PORT listens on loopback (127.0.0.1) only; name a host (0.0.0.0:PORT) to listen
elsewhere, which prints a warning. --token-env VAR requires every HTTP request to carry
"Authorization: Bearer <the value of $VAR>".

A fork whose database connection dies (PostgreSQL) is replaced by a fresh copy; the call that
found it gets an error result saying so, and a warning is logged to stderr.

Examples:
  mcprl sandbox serve --fixture examples/fixtures/customers --stdio
  mcprl sandbox serve --fixture examples/fixtures/customers --http 8080
  MCPRL_TOKEN=$(openssl rand -hex 16) mcprl sandbox serve --fixture examples/fixtures/customers --http 0.0.0.0:8080 --token-env MCPRL_TOKEN
  npx @modelcontextprotocol/inspector --cli mcprl sandbox serve --fixture examples/fixtures/customers --stdio --method tools/list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
		},
	}
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
	_ = cmd.MarkFlagRequired("fixture")
	return cmd
}
