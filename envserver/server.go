package envserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/mcprl/mcprl/internal/httpguard"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxSessions     = 512
	DefaultIdleTimeout     = 5 * time.Minute
	DefaultMaxMessageBytes = 1 << 20
	DefaultRewards         = "assertions"
	DefaultMaxReplayCalls  = 64
	DefaultMaxAssertions   = 64
	DefaultFinishTimeout   = 2 * time.Minute
)

// Options configures a Server.
type Options struct {
	// Fixtures are the fixtures sessions may fork, by name; a task names
	// its fixture (or the only one is used).
	Fixtures map[string]*task.Fixture
	// Tasks are the tasks a reset may name by id.
	Tasks []task.Task
	// DSN selects the database: "" is embedded SQLite, postgres://... is
	// PostgreSQL (see package sqldb).
	DSN string
	// Rewards is the reward spec a finished episode is scored with, in
	// reward.Registry.Parse's form ("assertions", "compute_mcp_reward,assertions",
	// "format:0.3,tool_selection:0.3,execution:0.4"); DefaultRewards when empty.
	Rewards string
	// MaxSessions caps concurrent sessions (WebSocket connections and
	// sessions made over /mcp); DefaultMaxSessions when zero. Sessions made
	// over /mcp (openenv/session/create, held by no connection) may take
	// half of them at most, so that they never lock WebSocket clients out.
	MaxSessions int
	// IdleTimeout frees a session (its fork, its connection) after this long
	// without a message; DefaultIdleTimeout when zero.
	IdleTimeout time.Duration
	// CallTimeout bounds one tool call (sandbox.DefaultCallTimeout when zero).
	CallTimeout time.Duration
	// MaxMessageBytes is the largest message accepted; DefaultMaxMessageBytes
	// when zero. A larger one gets a VALIDATION_ERROR.
	MaxMessageBytes int64
	// MaxReplayCalls caps the tool calls a finish with "replay": true runs,
	// as max_tool_calling_iterations caps a rollout's rounds
	// (DefaultMaxReplayCalls when zero): the calls after it are not run and
	// the episode is scored as truncated.
	MaxReplayCalls int
	// MaxAssertions caps the ground_truth_assertions of a task given inline
	// at reset (DefaultMaxAssertions when zero).
	MaxAssertions int
	// FinishTimeout bounds a finish (its replayed calls and its scoring) and
	// the scoring of a state (DefaultFinishTimeout when zero). A client that
	// disconnects cancels them at once.
	FinishTimeout time.Duration
	// Logger receives the server's diagnostics (discarded when nil).
	Logger *slog.Logger
}

// Server is an OpenEnv environment server over mcprl's sandboxes. Its
// Handler serves the endpoints; Close ends every session.
type Server struct {
	opts      Options
	sandboxes *sandbox.Factories          // owns the factories
	factories map[string]*sandbox.Factory // every fixture's, by name
	tasks     map[string]*task.Task
	reward    reward.Func
	mcpReward *reward.MCPReward
	slots     chan struct{}
	metadata  json.RawMessage
	// httpSessions counts the sessions made over /mcp (openenv/session/create).
	httpSessions atomic.Int64

	mu        sync.Mutex
	sessions  map[string]*session
	snapshots map[string]*snapshot // forks of episodes, by fork id (fork.go)
	closed    bool
	wg        sync.WaitGroup // open sessions
	conns     sync.WaitGroup // WebSocket connection goroutines
	stop      chan struct{}  // closed by Close: ends the reaper
	reaped    chan struct{}

	stats counters
}

type counters struct {
	forksCreated, openForks, toolCalls, toolErrors, episodesScored, reaped, rejected atomic.Int64
	episodeForks, openSnapshots                                                      atomic.Int64
}

// Stats are the server's counters, served at GET /stats.
type Stats struct {
	ActiveSessions int `json:"active_sessions"`
	MaxSessions    int `json:"max_sessions"`
	// OpenForks is the number of sandbox forks alive now; ForksCreated
	// counts every fork made since start.
	OpenForks    int64 `json:"open_forks"`
	ForksCreated int64 `json:"forks_created"`
	// ToolCalls counts tool calls executed in forks; ToolErrors those
	// whose tool server failed or timed out.
	ToolCalls      int64 `json:"tool_calls"`
	ToolErrors     int64 `json:"tool_errors"`
	EpisodesScored int64 `json:"episodes_scored"`
	// SessionsReaped counts sessions freed by the idle timeout;
	// SessionsRejected connections (and forks of episodes) refused at the
	// session cap.
	SessionsReaped   int64 `json:"sessions_reaped"`
	SessionsRejected int64 `json:"sessions_rejected"`
	// EpisodeForks counts the forks of episodes ({"type": "fork"}) made
	// since start; OpenEpisodeForks those alive now (each holds a slot and
	// a sandbox fork of its own, besides OpenForks).
	EpisodeForks     int64 `json:"episode_forks"`
	OpenEpisodeForks int64 `json:"open_episode_forks"`
}

// New builds a sandbox factory for every fixture (each builds its database
// template once) and the reward. It starts no session.
func New(ctx context.Context, opts Options) (_ *Server, err error) {
	if len(opts.Fixtures) == 0 {
		return nil, errors.New("envserver: no fixtures")
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.MaxReplayCalls <= 0 {
		opts.MaxReplayCalls = DefaultMaxReplayCalls
	}
	if opts.MaxAssertions <= 0 {
		opts.MaxAssertions = DefaultMaxAssertions
	}
	if opts.FinishTimeout <= 0 {
		opts.FinishTimeout = DefaultFinishTimeout
	}
	if strings.TrimSpace(opts.Rewards) == "" {
		opts.Rewards = DefaultRewards
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts:      opts,
		sandboxes: sandbox.NewFactories(opts.Fixtures, sandbox.Options{DSN: opts.DSN, CallTimeout: opts.CallTimeout, Logger: opts.Logger}),
		tasks:     map[string]*task.Task{},
		mcpReward: reward.NewMCPReward(reward.DefaultMCPRewardConfig()),
		slots:     make(chan struct{}, opts.MaxSessions),
		sessions:  map[string]*session{},
		snapshots: map[string]*snapshot{},
		stop:      make(chan struct{}),
		reaped:    make(chan struct{}),
	}
	if s.reward, err = reward.NewRegistry().Parse(opts.Rewards); err != nil {
		return nil, fmt.Errorf("envserver: rewards: %w", err)
	}
	for i := range opts.Tasks {
		t := &opts.Tasks[i]
		if t.ID == "" {
			continue
		}
		if _, dup := s.tasks[t.ID]; dup {
			return nil, fmt.Errorf("envserver: task id %q appears twice", t.ID)
		}
		s.tasks[t.ID] = t
	}
	if s.factories, err = s.sandboxes.Start(ctx, task.Names(opts.Fixtures)); err != nil {
		s.sandboxes.Close()
		return nil, fmt.Errorf("envserver: %w", err)
	}
	s.metadata, _ = json.Marshal(map[string]any{
		"name": "mcprl",
		"description": fmt.Sprintf("mcprl live MCP sandboxes (fixtures: %s; %d tasks; reward: %s): a copy-on-write fork per episode, "+
			"confined SQL and linters, verifiable rewards", strings.Join(task.Names(opts.Fixtures), ", "), len(s.tasks), opts.Rewards),
		"readme_content":    nil,
		"version":           "1",
		"author":            "mcprl",
		"documentation_url": nil,
	})
	go s.reap()
	return s, nil
}

// Handler returns the HTTP handler of every endpoint. A cross-site request
// (a foreign Origin on a POST) and, on loopback, a request for another
// Host (DNS rebinding) are refused with 403 (httpguard.SameOrigin); the
// WebSocket upgrade checks its Origin too.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.serveWS)
	mux.HandleFunc("POST /mcp", s.serveMCP)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
	})
	mux.HandleFunc("GET /metadata", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.metadata)
	})
	mux.HandleFunc("GET /schema", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, schemas)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	return httpguard.SameOrigin(mux)
}

// Stats returns the server's counters now.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	active := len(s.sessions)
	s.mu.Unlock()
	return Stats{
		ActiveSessions:   active,
		MaxSessions:      s.opts.MaxSessions,
		OpenForks:        s.stats.openForks.Load(),
		ForksCreated:     s.stats.forksCreated.Load(),
		ToolCalls:        s.stats.toolCalls.Load(),
		ToolErrors:       s.stats.toolErrors.Load(),
		EpisodesScored:   s.stats.episodesScored.Load(),
		SessionsReaped:   s.stats.reaped.Load(),
		SessionsRejected: s.stats.rejected.Load(),
		EpisodeForks:     s.stats.episodeForks.Load(),
		OpenEpisodeForks: s.stats.openSnapshots.Load(),
	}
}

// Close ends every session (their connections are closed and their forks
// freed), waits for them, and closes the fixtures' factories. It may be
// called more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	open := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		open = append(open, sess)
	}
	s.mu.Unlock()
	close(s.stop)
	<-s.reaped
	for _, sess := range open {
		sess.end(endShutdown)
	}
	s.reapSnapshots(true)
	s.wg.Wait()
	s.conns.Wait()
	return s.sandboxes.Close()
}

var (
	errCapacity     = errors.New("session capacity reached")
	errHTTPCapacity = fmt.Errorf("%w for sessions made over /mcp (half the server's sessions; a WebSocket connection may still get one)", errCapacity)
)

// openHTTP opens a session over /mcp (openenv/session/create): at most
// half the slots (one at least) hold such sessions.
func (s *Server) openHTTP() (*session, error) {
	if s.httpSessions.Add(1) > int64(max(1, s.opts.MaxSessions/2)) {
		s.httpSessions.Add(-1)
		s.stats.rejected.Add(1)
		return nil, errHTTPCapacity
	}
	sess, err := s.open(nil)
	if err != nil {
		s.httpSessions.Add(-1)
		return nil, err
	}
	sess.created = true
	return sess, nil
}

// open reserves a session slot; it fails at the cap or after Close.
// c is the session's WebSocket connection (nil for sessions made over /mcp).
func (s *Server) open(c *websocket.Conn) (*session, error) {
	select {
	case s.slots <- struct{}{}:
	default:
		s.stats.rejected.Add(1)
		return nil, errCapacity
	}
	ctx, cancel := context.WithCancel(context.Background())
	sess := &session{id: newID(), srv: s, ws: c != nil, ctx: ctx, cancel: cancel}
	if c != nil {
		sess.hangUp, sess.ping = c.Close, c.Ping
	}
	sess.touch()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cancel()
		<-s.slots
		return nil, errors.New("server is shutting down")
	}
	s.sessions[sess.id] = sess
	s.wg.Add(1)
	return sess, nil
}

// release frees a session's fork and its slot. It runs once per session.
func (s *Server) release(sess *session) {
	sess.why.CompareAndSwap(0, int32(endClient))
	sess.cancel()
	sess.mu.Lock()
	sess.closeFork()
	sess.mu.Unlock()
	s.mu.Lock()
	delete(s.sessions, sess.id)
	s.mu.Unlock()
	if sess.created {
		s.httpSessions.Add(-1)
	}
	<-s.slots
	s.wg.Done()
}

func (s *Server) session(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// reap ends sessions idle for longer than the idle timeout.
func (s *Server) reap() {
	defer close(s.reaped)
	every := s.opts.IdleTimeout / 4
	if every > time.Second {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		s.reapSnapshots(false)
		now := time.Now().UnixNano()
		var idle []*session
		s.mu.Lock()
		for _, sess := range s.sessions {
			if sess.busy.Load() == 0 && !sess.ended() && !sess.probing.Load() && now-sess.last.Load() > int64(s.opts.IdleTimeout) {
				idle = append(idle, sess)
			}
		}
		s.mu.Unlock()
		for _, sess := range idle {
			if sess.ws {
				// A WebSocket peer that answers a ping is alive (a trainer
				// between turns); one that does not (a half-open socket, a
				// vanished host) is freed.
				sess.probing.Store(true)
				go s.probe(sess)
				continue
			}
			s.expire(sess)
		}
	}
}

// probe pings an idle WebSocket session's peer and frees the session when
// no pong comes back within the idle timeout (30 s at most).
func (s *Server) probe(sess *session) {
	defer sess.probing.Store(false)
	ctx, cancel := context.WithTimeout(sess.ctx, min(s.opts.IdleTimeout, 30*time.Second))
	defer cancel()
	if err := sess.ping(ctx); err == nil {
		sess.touch()
		return
	}
	s.expire(sess)
}

func (s *Server) expire(sess *session) {
	if sess.end(endIdle) {
		s.stats.reaped.Add(1)
		s.opts.Logger.Info("envserver: session idle, its fork freed", "session", sess.id, "idle_timeout", s.opts.IdleTimeout)
	}
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
