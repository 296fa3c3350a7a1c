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
		Long:  help("sandbox"),
		Args:  cobra.NoArgs,
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
		Long:  help("sandbox-serve"),
		Args:  cobra.NoArgs,
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
