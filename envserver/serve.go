package envserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/mcprl/mcprl/internal/httpguard"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/task"
)

// ServeConfig is what ListenAndServe serves and where: `mcprl env serve`.
type ServeConfig struct {
	// Options configure the Server; Fixtures and Tasks are loaded from
	// FixturesDir and TasksPath.
	Options
	// FixturesDir is the directory of fixture directories; TasksPath the
	// tasks JSONL a reset may name by id ("": none, tasks come inline).
	FixturesDir, TasksPath string
	// Listen is [HOST:]PORT (no host: loopback; another host is warned
	// about unless Token guards it).
	Listen string
	// Token, when set, is the bearer token every request but GET /health
	// must carry.
	Token string
	// MaxConnections caps the HTTP connections open at once, WebSockets
	// included (0: MaxSessions + 256).
	MaxConnections int
	// Verbose logs sessions freed and other diagnostics (at info level;
	// warnings only otherwise).
	Verbose bool
	// Log receives the start and stop lines, warnings and the diagnostics.
	Log io.Writer
}

// ListenAndServe loads c's fixtures and tasks, builds the Server and serves
// it at c.Listen until ctx is done; then it closes every session and fork.
// It writes a line to c.Log when it starts listening and when it stopped.
func ListenAndServe(ctx context.Context, c ServeConfig) error {
	opts := c.Options
	var err error
	if opts.Fixtures, err = task.LoadFixtures(c.FixturesDir); err != nil {
		return fmt.Errorf("envserver: %w", err)
	}
	if c.TasksPath != "" {
		if opts.Tasks, err = task.Load(c.TasksPath, task.LoadOptions{Fixtures: opts.Fixtures, Check: reward.CheckTask}); err != nil {
			return fmt.Errorf("envserver: %w", err)
		}
	}
	level := slog.LevelWarn
	if c.Verbose {
		level = slog.LevelInfo
	}
	opts.Logger = slog.New(slog.NewTextHandler(c.Log, &slog.HandlerOptions{Level: level}))
	srv, err := New(ctx, opts)
	if err != nil {
		return err
	}
	l, err := httpguard.Listen(c.Listen, c.Token != "", c.Log)
	if err != nil {
		srv.Close()
		return err
	}
	maxConns := c.MaxConnections
	if maxConns <= 0 {
		maxConns = DefaultMaxSessions + 256
		if opts.MaxSessions > 0 {
			maxConns = opts.MaxSessions + 256
		}
	}
	l = httpguard.LimitListener(l, maxConns)
	fmt.Fprintf(c.Log, "mcprl: environment server at http://%s/ (fixtures %s, %d tasks, rewards %s)\n",
		l.Addr(), c.FixturesDir, len(opts.Tasks), opts.Rewards)
	err = httpguard.Serve(ctx, l, httpguard.Bearer(c.Token, srv.Handler(), "/health"), 10*time.Second, opts.Logger)
	st := srv.Stats()
	cerr := srv.Close()
	fmt.Fprintf(c.Log, "mcprl: environment server stopped: %d sessions and %d forks closed, %d tool calls served\n",
		st.ActiveSessions, st.OpenForks, st.ToolCalls)
	if err != nil {
		return err
	}
	return cerr
}
