package agent

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

// Open starts the sandbox of the fixture in dir (its database in embedded SQLite, or PostgreSQL at dsn) for
// an Agent whose Runner the caller sets. Its system prompt is systemPrompt or, with catalog, the fixture's
// tool catalog in the user's task format (toolcall.RenderCatalog). Close frees the sandbox.
func Open(ctx context.Context, dir, dsn string, catalog bool, systemPrompt string) (*Agent, error) {
	fx, err := task.LoadFixture(dir)
	if err != nil {
		return nil, err
	}
	f, err := sandbox.NewFactory(ctx, fx, sandbox.Options{DSN: dsn})
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", dir, err)
	}
	a := &Agent{Sandbox: f, SystemPrompt: systemPrompt}
	if catalog {
		a.SystemPrompt = toolcall.RenderCatalog(f.Tools())
	}
	return a, nil
}

// Intro writes the session's first line, as label: the fixture, its tools and how to stop.
func (a *Agent) Intro(w io.Writer, label string) {
	fmt.Fprintf(w, "%s: fixture %s, tools %s; one question a line, exit to stop\n",
		label, a.Sandbox.Fixture().Name, strings.Join(sandbox.ToolNames(a.Sandbox.Tools()), ", "))
}

// ShowSystemPrompt writes the session's system prompt, if it has one, as label: asTrained says that it is the one
// the model was trained with (not given on the command line).
func (a *Agent) ShowSystemPrompt(w io.Writer, label string, asTrained bool) {
	if a.SystemPrompt == "" {
		return
	}
	from := ""
	if asTrained {
		from = " (as trained)"
	}
	fmt.Fprintf(w, "%s: system prompt%s:\n%s\n", label, from, a.SystemPrompt)
}

// Close closes the sandbox.
func (a *Agent) Close() error { return a.Sandbox.Close() }
