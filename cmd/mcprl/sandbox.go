package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
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
		fixture, httpAddr, dsn string
		stdio, verbose         bool
		callTimeout            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve --fixture DIR (--stdio | --http ADDR) [--dsn DSN]",
		Short: "Serve a fixture's sandbox to any MCP client over stdio or streamable HTTP",
		Long: `serve builds the fixture's database once, forks it, and serves the sandbox's tools
(query_database {sql}, run_linter {path}, plus the tools of the fixture's external MCP servers)
with the official MCP Go SDK. Changes made through query_database live in the fork and are
dropped when serve exits; the fixture itself is never changed.

--stdio serves one client on stdin/stdout (logs go to stderr). --http ADDR serves MCP streamable
HTTP at http://ADDR/ (all clients share one database fork) until interrupted.

Examples:
  mcprl sandbox serve --fixture examples/fixtures/customers --stdio
  mcprl sandbox serve --fixture examples/fixtures/customers --http 127.0.0.1:8080
  npx @modelcontextprotocol/inspector --cli mcprl sandbox serve --fixture examples/fixtures/customers --stdio --method tools/list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stdio == (httpAddr != "") {
				return errors.New("give exactly one of --stdio or --http ADDR")
			}
			fx, err := task.LoadFixture(fixture)
			if err != nil {
				return err
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelDebug
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ctx := cmd.Context()
			f, err := sandbox.NewFactory(ctx, fx, sandbox.Options{DSN: dsn, CallTimeout: callTimeout, Logger: logger})
			if err != nil {
				return err
			}
			defer f.Close()
			if stdio {
				return f.Serve(ctx, &mcp.StdioTransport{})
			}
			return serveHTTP(ctx, f, httpAddr, logger)
		},
	}
	cmd.Flags().StringVar(&fixture, "fixture", "", "fixture directory (schema.sql, data.sql, workspace/, sandbox.yaml), e.g. examples/fixtures/customers")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve one MCP client on stdin/stdout")
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve MCP streamable HTTP on this address (host:port, e.g. 127.0.0.1:8080)")
	cmd.Flags().StringVar(&dsn, "dsn", "", `PostgreSQL DSN (postgres://user:pass@host/db); empty uses embedded SQLite`)
	cmd.Flags().DurationVar(&callTimeout, "call-timeout", sandbox.DefaultCallTimeout, "longest time one tool call may take")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log MCP SDK diagnostics to stderr")
	_ = cmd.MarkFlagRequired("fixture")
	return cmd
}

// serveHTTP serves the sandbox at addr until ctx ends (Ctrl-C).
func serveHTTP(ctx context.Context, f *sandbox.Factory, addr string, logger *slog.Logger) error {
	h, closeDB, err := f.HTTPHandler(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "mcprl: serving fixture %s (MCP streamable HTTP) at http://%s/\n", f.Fixture().Name, l.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("shutdown", "err", err)
		srv.Close()
	}
	return nil
}
