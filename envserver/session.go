package envserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

type endReason int32

const (
	endClient endReason = iota + 1
	endIdle
	endShutdown
)

// session is one client's episode: at most one sandbox fork at a time.
// Its messages are handled one at a time (mu).
type session struct {
	id  string
	srv *Server
	ws  bool // a WebSocket connection (else made over POST /mcp)
	// created is set on a session made by openenv/session/create (counted
	// in Server.httpSessions).
	created bool
	ctx     context.Context
	cancel  context.CancelFunc
	last    atomic.Int64 // unix nanoseconds of the last message
	busy    atomic.Int32 // messages being handled
	why     atomic.Int32 // endReason once ended
	once    sync.Once
	// hangUp closes a WebSocket session's connection with a status; its
	// read loop then ends and releases the session.
	hangUp func(websocket.StatusCode, string) error
	// ping probes a WebSocket session's peer (nil for sessions made over
	// /mcp); probing is set while a probe is in flight.
	ping    func(context.Context) error
	probing atomic.Bool

	mu        sync.Mutex
	episodeID string
	task      *task.Task
	fixture   string
	sb        *sandbox.Sandbox
	calls     []chat.CallResult
	steps     int
	done      bool
	truncated bool // a replay stopped at MaxReplayCalls
	trajErr   string
	score     *episodeScore
}

type episodeScore struct {
	total     float64
	rewards   map[string]float64
	breakdown json.RawMessage
}

func (sess *session) touch() { sess.last.Store(time.Now().UnixNano()) }

// begin marks the session busy (the reaper skips it) until the returned
// func runs.
func (sess *session) begin() func() {
	sess.busy.Add(1)
	sess.touch()
	return func() {
		sess.touch()
		sess.busy.Add(-1)
	}
}

// end ends the session at once: its fork and slot are freed, and a
// WebSocket session's connection is closed with a status saying why (the
// close handshake finishes in the connection's own goroutine). It reports
// whether this call ended it.
func (sess *session) end(why endReason) bool {
	if !sess.why.CompareAndSwap(0, int32(why)) {
		return false
	}
	sess.cancel()
	sess.release()
	code, reason := websocket.StatusPolicyViolation, "session idle for longer than "+sess.srv.opts.IdleTimeout.String()
	if why == endShutdown {
		code, reason = websocket.StatusGoingAway, "server shutting down"
	}
	if sess.ws && why != endClient {
		// Server.Close waits for the close handshake (at most 5s, the
		// websocket package's limit for a peer that does not answer).
		sess.srv.conns.Add(1)
		go func() {
			defer sess.srv.conns.Done()
			err := sess.hangUp(code, reason)
			sess.srv.opts.Logger.Info("envserver: session closed", "session", sess.id, "why", reason, "err", err)
		}()
	}
	return true
}

// ended reports whether the session was ended; callers hold mu, so that
// no episode starts in a session already released.
func (sess *session) ended() bool { return sess.why.Load() != 0 }

func (sess *session) release() { sess.once.Do(func() { sess.srv.release(sess) }) }

// closeFork drops the episode's fork. Callers hold mu.
func (sess *session) closeFork() {
	if sess.sb == nil {
		return
	}
	if err := sess.sb.Close(); err != nil {
		sess.srv.opts.Logger.Warn("envserver: closing fork", "session", sess.id, "err", err)
	}
	sess.sb = nil
	sess.srv.stats.openForks.Add(-1)
}

// start begins an episode of t on fixture fx in a fresh fork.
func (sess *session) start(t *task.Task, fx, episodeID string) *protoError {
	f := sess.srv.factories[fx]
	sess.closeFork()
	sb, err := f.Fork(sess.ctx)
	if err != nil {
		return execution("fork sandbox of fixture %s: %v", fx, err)
	}
	sess.adopt(sb, t, fx, episodeID)
	return nil
}

// adopt makes sb the episode's fork (the previous one closed), for task t
// on fixture fx, with no calls yet. Callers hold mu.
func (sess *session) adopt(sb *sandbox.Sandbox, t *task.Task, fx, episodeID string) {
	sess.closeFork()
	sess.srv.stats.forksCreated.Add(1)
	sess.srv.stats.openForks.Add(1)
	if episodeID == "" {
		episodeID = newID()
	}
	sess.sb, sess.task, sess.fixture, sess.episodeID = sb, t, fx, episodeID
	sess.calls, sess.steps, sess.done, sess.truncated, sess.trajErr, sess.score = nil, 0, false, false, "", nil
}

// resetData is what reset accepts: a task by id, or a task's fields
// inline, and OpenEnv's seed and episode_id. Other fields (a dataset row's
// prompt, ...) are ignored, as OpenEnv ignores reset kwargs its
// environment does not take.
type resetData struct {
	TaskID                *string   `json:"task_id"`
	ID                    *string   `json:"id"`
	Task                  *string   `json:"task"`
	SystemPrompt          *string   `json:"system_prompt"`
	GroundTruthAssertions *[]string `json:"ground_truth_assertions"`
	StateAssertions       *[]string `json:"state_assertions"`
	Fixture               *string   `json:"fixture"`
	EpisodeID             *string   `json:"episode_id"`
	Seed                  *int64    `json:"seed"`
	// ForkID starts the episode from a fork of another ({"type": "fork"}):
	// its task, its state and its calls so far.
	ForkID *string `json:"fork_id"`
}

func (sess *session) reset(data json.RawMessage) (StepResult, *protoError) {
	var d resetData
	if len(data) > 0 && string(data) != "null" {
		if err := json.Unmarshal(data, &d); err != nil {
			return StepResult{}, decodeError("data", err)
		}
	}
	if d.ForkID != nil {
		episodeID := ""
		if d.EpisodeID != nil {
			episodeID = *d.EpisodeID
		}
		if perr := sess.resetFromFork(*d.ForkID, episodeID); perr != nil {
			return StepResult{}, perr
		}
		return StepResult{Observation: sess.resetObservation(*d.ForkID)}, nil
	}
	id := ""
	switch {
	case d.TaskID != nil:
		id = *d.TaskID
	case d.ID != nil:
		id = *d.ID
	}
	var t *task.Task
	switch {
	case id != "" && sess.srv.tasks[id] != nil:
		t = sess.srv.tasks[id]
	case d.Task != nil && strings.TrimSpace(*d.Task) != "":
		t = &task.Task{ID: id, Task: *d.Task}
		if d.SystemPrompt != nil {
			t.SystemPrompt = *d.SystemPrompt
		}
		if d.GroundTruthAssertions != nil {
			if n, most := len(*d.GroundTruthAssertions), sess.srv.opts.MaxAssertions; n > most {
				return StepResult{}, validation("ground_truth_assertions", fmt.Sprintf("%d assertions, more than the server's limit of %d", n, most))
			}
			t.GroundTruthAssertions = *d.GroundTruthAssertions
			if field, err := reward.CheckTask(t); err != nil {
				return StepResult{}, validation(field, err.Error())
			}
		}
		if d.StateAssertions != nil {
			t.StateAssertions = *d.StateAssertions
		}
		if d.Fixture != nil {
			t.Fixture = *d.Fixture
		}
	case id != "":
		return StepResult{}, validation("task_id", fmt.Sprintf("unknown task id %q (the server's task file has %d tasks; or give the task's fields inline)", id, len(sess.srv.tasks)))
	default:
		return StepResult{}, validation("task", "reset needs task_id (a task of the server's task file) or the task inline: task, ground_truth_assertions, fixture, system_prompt")
	}
	fx, perr := sess.srv.fixtureFor(t.Fixture)
	if perr != nil {
		return StepResult{}, perr
	}
	episodeID := ""
	if d.EpisodeID != nil {
		episodeID = *d.EpisodeID
	}
	if perr := sess.start(t, fx, episodeID); perr != nil {
		return StepResult{}, perr
	}
	return StepResult{Observation: sess.resetObservation("")}, nil
}

// resetObservation describes the episode just started (from fork forkID,
// when not empty). Callers hold mu.
func (sess *session) resetObservation(forkID string) ResetObservation {
	t, tools := sess.task, sess.sb.Tools()
	if t == nil { // an episode of tool calls over /mcp, with no task
		t = &task.Task{}
	}
	prompt := t.SystemPrompt
	if prompt == "" {
		prompt = toolcall.RenderCatalog(tools)
	}
	obs := ResetObservation{
		EpisodeID: sess.episodeID, TaskID: t.ID, Fixture: sess.fixture, SystemPrompt: prompt, Task: t.Task,
		Tools: toolsOf(tools), ToolSchemas: toolcall.FunctionSchemas(tools),
	}
	if forkID != "" {
		obs.ForkOf, obs.StepCount = forkID, sess.steps
	}
	return obs
}

// fixtureFor resolves a task's fixture name: the only fixture when the
// name is empty.
func (s *Server) fixtureFor(name string) (string, *protoError) {
	if name == "" {
		if len(s.factories) == 1 {
			for n := range s.factories {
				return n, nil
			}
		}
		return "", validation("fixture", fmt.Sprintf("name a fixture (the server has %s)", strings.Join(sortedKeys(s.factories), ", ")))
	}
	if s.factories[name] == nil {
		return "", validation("fixture", fmt.Sprintf("unknown fixture %q (the server has %s)", name, strings.Join(sortedKeys(s.factories), ", ")))
	}
	return name, nil
}

// action is a step's data: OpenEnv's CallToolAction and ListToolsAction
// and mcprl's finish.
type action struct {
	Type       string          `json:"type"`
	ToolName   *string         `json:"tool_name"`
	Arguments  json.RawMessage `json:"arguments"`
	Completion json.RawMessage `json:"completion"`
	// Replay, on finish, first runs the completion's tool calls in the
	// episode's fork, in order (for a client that ran none: verl's
	// compute_score, mcprl score's way).
	Replay   bool            `json:"replay"`
	Metadata json.RawMessage `json:"metadata"`
}

func (sess *session) step(data json.RawMessage) (StepResult, *protoError) {
	if len(data) == 0 || string(data) == "null" {
		return StepResult{}, validation("data", "field required: the action, e.g. {\"type\": \"call_tool\", \"tool_name\": ..., \"arguments\": {...}}")
	}
	var a action
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return StepResult{}, decodeError("data", err)
	}
	switch a.Type {
	case ActionListTools:
		f := sess.srv.factories[sess.fixture]
		if f == nil {
			fx, perr := sess.srv.fixtureFor("")
			if perr != nil {
				return StepResult{}, perr
			}
			f = sess.srv.factories[fx]
		}
		return StepResult{Observation: ListToolsObservation{Tools: toolsOf(f.Tools())}}, nil
	case ActionCallTool:
		if a.ToolName == nil || *a.ToolName == "" {
			return StepResult{}, validation("tool_name", "field required: the tool to call")
		}
		if len(a.Arguments) > 0 && string(a.Arguments) != "null" && a.Arguments[0] != '{' {
			return StepResult{}, validation("arguments", "must be an object")
		}
		if perr := sess.ready(); perr != nil {
			return StepResult{}, perr
		}
		obs := sess.call(*a.ToolName, a.Arguments)
		return StepResult{Observation: obs}, nil
	case ActionFinish:
		if perr := sess.ready(); perr != nil {
			return StepResult{}, perr
		}
		if sess.task == nil {
			return StepResult{}, execution("episode %s has no task to score it against: reset with a task", sess.episodeID)
		}
		text, answer, perr := completionText(a.Completion)
		if perr != nil {
			return StepResult{}, perr
		}
		// The replayed calls and the scoring have FinishTimeout in all; a
		// client that disconnects cancels them (sess.ctx).
		ctx, cancel := context.WithTimeout(sess.ctx, sess.srv.opts.FinishTimeout)
		defer cancel()
		if a.Replay {
			if err := sess.replay(ctx, text); err != nil {
				return StepResult{}, execution("replaying the completion's calls: %v", sess.timeout(ctx, err))
			}
		}
		sc, err := sess.scoreEpisode(ctx, text, answer)
		if err != nil {
			return StepResult{}, execution("scoring episode %s: %v", sess.episodeID, sess.timeout(ctx, err))
		}
		sess.done, sess.score = true, sc
		sess.steps++
		sess.srv.stats.episodesScored.Add(1)
		total := sc.total
		return StepResult{Observation: FinishObservation{Rewards: sc.rewards, Breakdown: sc.breakdown, ToolCalls: len(sess.calls),
			Truncated: sess.truncated}, Reward: &total, Done: true}, nil
	case "":
		return StepResult{}, validation("type", "field required: call_tool, list_tools or finish")
	default:
		return StepResult{}, validation("type", fmt.Sprintf("unknown action type %q (call_tool, list_tools, finish)", a.Type))
	}
}

// ready checks that an episode is running.
func (sess *session) ready() *protoError {
	switch {
	case sess.sb == nil:
		return execution("no episode: send reset first")
	case sess.done:
		return execution("episode %s is done; send reset to start another", sess.episodeID)
	}
	return nil
}

// call runs one tool call in the episode's fork and records it.
func (sess *session) call(name string, args json.RawMessage) CallToolObservation {
	cr := chat.CallResult{Call: chat.Call{Name: name, Arguments: args}}
	obs := CallToolObservation{ToolName: name}
	sess.srv.stats.toolCalls.Add(1)
	res, err := sess.sb.Call(sess.ctx, name, args)
	if err != nil {
		sess.srv.stats.toolErrors.Add(1)
		kind := "transport_error"
		if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "did not answer within") {
			kind = "timeout"
		}
		obs.Error = &ToolError{ErrorType: kind, Message: err.Error()}
		cr.IsError, cr.Text = true, err.Error()
		if sess.trajErr == "" {
			sess.trajErr = fmt.Sprintf("tool %s: %v", name, err)
		}
	} else {
		obs.Result = toolResult(res)
		cr.IsError, cr.Text, cr.Structured = res.IsError, obs.Result.Data, res.StructuredContent
	}
	sess.calls = append(sess.calls, cr)
	sess.steps++
	return obs
}

// timeout names the server's limit when ctx's deadline ended err's work.
func (sess *session) timeout(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: the finish took longer than the server's limit of %v (--finish-timeout)", err, sess.srv.opts.FinishTimeout)
	}
	return err
}

// replay runs text's tool calls in the fork and records them; malformed
// calls are recorded with their parse error, as a rollout would. At most
// MaxReplayCalls well-formed calls run: the text after the last of them is
// not replayed, and the episode is marked truncated.
func (sess *session) replay(ctx context.Context, text string) error {
	wellFormed := 0
	for _, p := range toolcall.Parse(text) {
		if p.Err != nil {
			continue
		}
		if wellFormed++; wellFormed > sess.srv.opts.MaxReplayCalls {
			text, sess.truncated = text[:p.Start], true
			break
		}
	}
	traj, err := reward.Replay(ctx, sess.sb, text)
	if err != nil {
		return err
	}
	for _, turn := range traj.Turns {
		for _, c := range turn.Calls {
			if c.ParseError == "" {
				sess.srv.stats.toolCalls.Add(1)
			}
			sess.calls = append(sess.calls, c)
		}
	}
	if traj.Error != "" && sess.trajErr == "" {
		sess.trajErr = traj.Error
	}
	return nil
}

// scoreEpisode scores the episode: the calls it ran, with text as the
// agent's completion (the calls rendered as Qwen2.5 writes them when the
// client sent none).
func (sess *session) scoreEpisode(ctx context.Context, text, answer string) (*episodeScore, error) {
	if text == "" {
		parts := make([]string, len(sess.calls))
		for i, c := range sess.calls {
			parts[i] = toolcall.RenderCall(c.Call)
		}
		text = strings.Join(parts, "\n")
	}
	traj := &chat.Trajectory{
		Turns:     []chat.Turn{{Text: text, Calls: sess.calls}},
		Answer:    answer,
		Error:     sess.trajErr,
		Truncated: sess.truncated,
	}
	in := &reward.Input{Task: sess.task, Trajectory: traj, Sandbox: sess.sb}
	sc, err := sess.srv.reward.Score(ctx, in)
	if err != nil {
		return nil, err
	}
	rewards := map[string]float64{}
	if len(sc.Parts) > 0 {
		for _, p := range sc.Parts {
			rewards[p.Name] = p.Score.Value
		}
	} else {
		rewards[sess.srv.reward.Name()] = sc.Value
	}
	if _, ok := rewards[reward.MCPRewardName]; !ok {
		mcp, err := sess.srv.mcpReward.Score(ctx, in)
		if err != nil {
			return nil, err
		}
		rewards[reward.MCPRewardName] = mcp.Value
	}
	return &episodeScore{total: sc.Value, rewards: rewards, breakdown: reward.Breakdown(sess.srv.reward.Name(), sc)}, nil
}

func (sess *session) state() (State, *protoError) {
	st := State{StepCount: sess.steps, Done: sess.done, ToolCalls: len(sess.calls), Error: sess.trajErr, Fixture: sess.fixture}
	if sess.sb == nil {
		return st, nil
	}
	st.EpisodeID = &sess.episodeID
	if sess.task == nil {
		return st, nil
	}
	st.TaskID = sess.task.ID
	sc := sess.score
	if sc == nil {
		ctx, cancel := context.WithTimeout(sess.ctx, sess.srv.opts.FinishTimeout)
		defer cancel()
		var err error
		if sc, err = sess.scoreEpisode(ctx, "", ""); err != nil {
			return State{}, execution("scoring episode %s: %v", sess.episodeID, sess.timeout(ctx, err))
		}
	}
	total := sc.total
	st.Reward, st.Rewards = &total, sc.rewards
	return st, nil
}

// completionText turns a finish action's completion into the agent's text
// and its final answer. A string is the text as sampled; a list of chat
// messages (TRL's conversational completions) is rendered as Qwen2.5's chat
// template writes assistant turns: the content, then each tool call as
// <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>.
func completionText(raw json.RawMessage) (text, answer string, _ *protoError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", "", nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", "", decodeError("completion", err)
		}
		return s, toolcall.StripCalls(s), nil
	}
	var msgs []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			Function *struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return "", "", validation("completion", "must be the completion's text or a list of chat messages")
	}
	var turns []string
	for _, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		content := contentText(m.Content)
		var b strings.Builder
		b.WriteString(content)
		for _, tc := range m.ToolCalls {
			c := chat.Call{Name: tc.Name, Arguments: tc.Arguments}
			if tc.Function != nil {
				c = chat.Call{Name: tc.Function.Name, Arguments: tc.Function.Arguments}
			}
			if len(c.Arguments) > 0 && c.Arguments[0] == '"' {
				// OpenAI's form: the arguments as a JSON string.
				var inner string
				if json.Unmarshal(c.Arguments, &inner) == nil && json.Valid([]byte(inner)) {
					c.Arguments = json.RawMessage(inner)
				}
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(toolcall.RenderCall(c))
		}
		turns = append(turns, b.String())
		answer = toolcall.StripCalls(content)
	}
	return strings.Join(turns, "\n"), answer, nil
}

// contentText reads a message's content: a string, or a list of parts whose
// text parts are joined.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// decodeError turns a JSON decoding error inside a message into a
// VALIDATION_ERROR naming the field.
func decodeError(where string, err error) *protoError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return validation(te.Field, fmt.Sprintf("must be %s, got %s", jsonKind(te.Type.Kind().String()), te.Value))
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return validation(strings.Trim(f, `"`), "extra fields not permitted")
	}
	return validation(where, strings.TrimPrefix(msg, "json: "))
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "a list"
	case "map", "struct":
		return "an object"
	case "int64", "int", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	}
	return goKind
}
