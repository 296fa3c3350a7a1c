package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/sandbox/sqldb"
)

// Defaults for zero HTTPOptions fields.
const (
	DefaultSessionTimeout = 10 * time.Minute
	DefaultMaxSessions    = 64
)

// HTTPOptions configures Factory.HTTPHandler.
type HTTPOptions struct {
	// SessionTimeout closes a session that has made no request for this
	// long, and drops its database fork (DefaultSessionTimeout when zero).
	SessionTimeout time.Duration
	// MaxSessions bounds the sessions open at once (DefaultMaxSessions
	// when zero): a client that would open one more is answered HTTP 503
	// with a JSON-RPC error.
	MaxSessions int
}

// codeTooManySessions is the JSON-RPC error code of a refused session (in
// the range JSON-RPC leaves to servers).
const codeTooManySessions = -32001

// HTTPHandler returns an MCP streamable-HTTP handler for the sandbox. Each
// MCP session gets its own database fork (made at its first tool call), so
// no client sees or waits on another's; a session idle for
// opts.SessionTimeout is closed with its fork. Every tools/call is bounded
// by Options.CallTimeout and every failure is an isError result. close
// ends every session and drops every fork.
func (f *Factory) HTTPHandler(opts HTTPOptions) (_ http.Handler, close func() error) {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	forks := &sessionForks{tmpl: f.tmpl, dbs: map[*mcp.ServerSession]*sqldb.DB{}}
	srv := f.newServer(forks.db, f.opts.CallTimeout, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger:         f.opts.Logger,
		SessionTimeout: opts.SessionTimeout,
	})
	capped := &sessionCap{next: h, srv: srv, max: opts.MaxSessions}
	return capped, func() error {
		for ss := range srv.Sessions() {
			ss.Close()
		}
		return forks.close()
	}
}

// sessionForks gives each MCP session its own database fork.
type sessionForks struct {
	tmpl *sqldb.Template

	mu     sync.Mutex
	dbs    map[*mcp.ServerSession]*sqldb.DB
	closed bool
}

// db returns the session's fork, forking it at the session's first call;
// the fork is dropped when the session ends.
func (p *sessionForks) db(ctx context.Context, req *mcp.CallToolRequest) (*sqldb.DB, error) {
	ss := req.Session
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("sandbox: the server is shutting down")
	}
	if db, ok := p.dbs[ss]; ok {
		return db, nil
	}
	db, err := p.tmpl.Fork(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox: forking the database for this session: %w", err)
	}
	p.dbs[ss] = db
	go func() {
		ss.Wait()
		p.mu.Lock()
		delete(p.dbs, ss)
		p.mu.Unlock()
		db.Close()
	}()
	return db, nil
}

func (p *sessionForks) close() error {
	p.mu.Lock()
	p.closed = true
	dbs := p.dbs
	p.dbs = map[*mcp.ServerSession]*sqldb.DB{}
	p.mu.Unlock()
	var errs []error
	for _, db := range dbs {
		errs = append(errs, db.Close())
	}
	return errors.Join(errs...)
}

// sessionCap refuses a new session when max are open.
type sessionCap struct {
	next http.Handler
	srv  *mcp.Server
	max  int

	mu sync.Mutex // held while a new session is made, so the count holds
}

func (c *sessionCap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		c.next.ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for range c.srv.Sessions() {
		n++
	}
	if n >= c.max {
		// Answer the request's own id, so that the client reads the error.
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
		if len(req.ID) == 0 {
			req.ID = json.RawMessage("null")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{
			"jsonrpc": "2.0",
			"id":      req.ID,
			"error": &jsonrpc.Error{Code: codeTooManySessions, Message: fmt.Sprintf(
				"too many sessions: %d are open, the most this server allows; close one or try again later", n)},
		})
		return
	}
	c.next.ServeHTTP(w, r)
}
