package sandbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/internal/httpguard"
	"github.com/mcprl/mcprl/task"
)

// ServeConfig is what ServeFixture serves and how: `mcprl sandbox serve`.
type ServeConfig struct {
	// Fixture is the fixture directory (schema.sql, data.sql, workspace/,
	// sandbox.yaml).
	Fixture string
	// HTTP is the [HOST:]PORT to serve MCP streamable HTTP on (no host:
	// loopback; another host is warned about unless Token guards it); ""
	// serves one client on stdin and stdout.
	HTTP string
	// Token, when set, is the bearer token every HTTP request must carry.
	Token string
	// Options configure the factory; its Logger is made from Verbose and Log.
	Options
	// HTTPOptions configure the HTTP handler's sessions.
	HTTPOptions
	// Verbose logs the MCP SDK's diagnostics (warnings only otherwise).
	Verbose bool
	// Log receives the start line, warnings and diagnostics (stderr: stdout
	// may be the MCP stream).
	Log io.Writer
}

// ServeFixture builds c.Fixture's database once and serves its sandbox's
// tools until ctx ends (over HTTP) or the client disconnects (over stdio):
// a database fork per MCP session, dropped when it ends.
func ServeFixture(ctx context.Context, c ServeConfig) error {
	fx, err := task.LoadFixture(c.Fixture)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if c.Verbose {
		level = slog.LevelDebug
	}
	opts := c.Options
	opts.Logger = slog.New(slog.NewTextHandler(c.Log, &slog.HandlerOptions{Level: level}))
	f, err := NewFactory(ctx, fx, opts)
	if err != nil {
		return err
	}
	defer f.Close()
	if c.HTTP == "" {
		return f.Serve(ctx, &mcp.StdioTransport{})
	}
	h, closeSessions := f.HTTPHandler(c.HTTPOptions)
	defer closeSessions()
	l, err := httpguard.Listen(c.HTTP, c.Token != "", c.Log)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	fmt.Fprintf(c.Log, "mcprl: serving fixture %s (MCP streamable HTTP) at http://%s/\n", fx.Name, l.Addr())
	return httpguard.Serve(ctx, l, httpguard.Bearer(c.Token, h), 5*time.Second, opts.Logger)
}
