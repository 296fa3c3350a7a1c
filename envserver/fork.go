package envserver

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// This file is forking an episode over the protocol: {"type": "fork"}
// snapshots the episode as it is (a fork of its sandbox fork, its task, its
// calls so far), and a reset with that fork_id, on any connection, starts
// an episode from the snapshot in a fork of its own. A snapshot is
// reusable: each reset from it gets its own fork (a trainer samples several
// continuations of one setback), so its writes never reach the snapshot, a
// sibling or the parent, and the parent's later writes never reach it. A
// snapshot holds a session slot until it is dropped: after --idle-timeout
// without a reset from it, or when the server closes.

// ForkResult answers {"type": "fork"}: the snapshot's id, the episode it
// was taken of and how many steps that episode had taken.
type ForkResult struct {
	ForkID    string `json:"fork_id"`
	EpisodeID string `json:"episode_id"`
	StepCount int    `json:"step_count"`
}

// snapshot is an episode as it was when forked.
type snapshot struct {
	id        string
	episodeID string
	task      *task.Task
	fixture   string
	calls     []chat.CallResult
	steps     int
	trajErr   string
	truncated bool
	last      atomic.Int64 // unix nanoseconds of the last use

	mu     sync.Mutex // one fork of sb at a time; closed once dropped
	sb     *sandbox.Sandbox
	closed bool
}

// fork snapshots the session's running episode. Callers hold sess.mu.
func (sess *session) fork() (ForkResult, *protoError) {
	if perr := sess.ready(); perr != nil {
		return ForkResult{}, perr
	}
	s := sess.srv
	select {
	case s.slots <- struct{}{}:
	default:
		s.stats.rejected.Add(1)
		return ForkResult{}, &protoError{Code: CodeCapacityReached, Message: fmt.Sprintf("session capacity reached: a fork of an episode holds a session slot, and all %d are taken", s.opts.MaxSessions)}
	}
	// A snapshot, not a fork: on PostgreSQL it holds no connection or slot
	// schema while it waits (each reset from it makes a fork of its own).
	sb, err := sess.sb.Snapshot(sess.ctx)
	if err != nil {
		<-s.slots
		return ForkResult{}, execution("fork episode %s: %v", sess.episodeID, err)
	}
	snap := &snapshot{
		id: newID(), episodeID: sess.episodeID, task: sess.task, fixture: sess.fixture,
		calls: append([]chat.CallResult(nil), sess.calls...), steps: sess.steps, trajErr: sess.trajErr,
		truncated: sess.truncated, sb: sb,
	}
	snap.last.Store(time.Now().UnixNano())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sb.Close()
		<-s.slots
		return ForkResult{}, &protoError{Code: CodeSession, Message: "server is shutting down"}
	}
	s.snapshots[snap.id] = snap
	s.mu.Unlock()
	s.stats.episodeForks.Add(1)
	s.stats.openSnapshots.Add(1)
	return ForkResult{ForkID: snap.id, EpisodeID: sess.episodeID, StepCount: snap.steps}, nil
}

// resetFromFork starts the session's episode from snapshot id, in a fork of
// its own. Callers hold sess.mu.
func (sess *session) resetFromFork(id, episodeID string) *protoError {
	s := sess.srv
	s.mu.Lock()
	snap := s.snapshots[id]
	s.mu.Unlock()
	unknown := validation("fork_id", fmt.Sprintf("unknown or expired fork id %q (a fork lives until --idle-timeout (%v) passes without a reset from it)", id, s.opts.IdleTimeout))
	if snap == nil {
		return unknown
	}
	snap.mu.Lock()
	defer snap.mu.Unlock()
	if snap.closed {
		return unknown
	}
	snap.last.Store(time.Now().UnixNano())
	sb, err := snap.sb.Fork(sess.ctx)
	if err != nil {
		return execution("start from fork %s: %v", id, err)
	}
	sess.adopt(sb, snap.task, snap.fixture, episodeID)
	sess.calls = append([]chat.CallResult(nil), snap.calls...)
	sess.steps, sess.truncated, sess.trajErr = snap.steps, snap.truncated, snap.trajErr
	return nil
}

// dropSnapshot frees a snapshot's fork and its slot, once.
func (s *Server) dropSnapshot(snap *snapshot) {
	s.mu.Lock()
	_, held := s.snapshots[snap.id]
	delete(s.snapshots, snap.id)
	s.mu.Unlock()
	if !held {
		return
	}
	snap.mu.Lock()
	snap.closed = true
	if err := snap.sb.Close(); err != nil {
		s.opts.Logger.Warn("envserver: closing a fork of an episode", "fork", snap.id, "err", err)
	}
	snap.mu.Unlock()
	s.stats.openSnapshots.Add(-1)
	<-s.slots
}

// reapSnapshots drops the snapshots unused for longer than the idle
// timeout; all of them when all is set (the server closing).
func (s *Server) reapSnapshots(all bool) {
	now := time.Now().UnixNano()
	var idle []*snapshot
	s.mu.Lock()
	for _, snap := range s.snapshots {
		if all || now-snap.last.Load() > int64(s.opts.IdleTimeout) {
			idle = append(idle, snap)
		}
	}
	s.mu.Unlock()
	for _, snap := range idle {
		s.dropSnapshot(snap)
		if !all {
			s.opts.Logger.Info("envserver: a fork of an episode unused, freed", "fork", snap.id, "idle_timeout", s.opts.IdleTimeout)
		}
	}
}
