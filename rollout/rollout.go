package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
)

// Config sizes a rollout, with TRL GRPOConfig's names.
type Config struct {
	NumGenerations           int // trajectories per task
	MaxPromptLength          int // prompt tokens kept (truncated from the left); 0: no limit
	MaxCompletionLength      int // sampled plus observation tokens per trajectory
	MaxToolCallingIterations int // rounds of tool execution per trajectory
	Sample                   policy.SampleOptions
}

// Runner runs trajectories of tasks against their fixtures' sandboxes.
type Runner struct {
	Policy    policy.Policy
	Tokenizer *tokenizer.Tokenizer
	Template  *tokenizer.Template
	Config    Config
	// Rewards score every trajectory as soon as it ends, while its sandbox
	// is still open (rewards read the sandbox's state), concurrently with
	// other trajectories.
	Rewards []reward.Func
	// Branching, when set, records each trajectory's first setback (an
	// observation it matches) with a fork of its sandbox at that moment,
	// so that Branch can sample continuations from there (Result.Setback).
	Branching *Triggers
	// ForceLook makes Branch's forced continuations look before they
	// retry, where the setback was a query_database call it can read: a
	// whole call, the look the setback suggests (package look: the tables
	// where one was missing, a row of the failed query's table, the
	// values of the column an empty query filtered on), runs first, and
	// the retry's opener follows its observation. Elsewhere they begin
	// with the tool-call opener alone.
	ForceLook bool
}

// Result is one trajectory of a job, with its task and what Rewards made
// of it.
type Result struct {
	*chat.Trajectory
	Task *task.Task
	// Scores[k] is Rewards[k]'s score of the trajectory, or the zero Score
	// where Errs[k] says why it has none. Both are nil when the trajectory
	// never had a sandbox (its fork failed) and so was not scored.
	Scores []reward.Score
	Errs   []error
	// Setback is the trajectory's first setback when Runner.Branching is
	// set and it met one: where Branch continues it. Its holder closes it.
	Setback *Setback
	// BranchAt is, for a continuation made by Branch, how many of the
	// trajectory's tokens are its root's prefix (the prompt, the turns up to
	// the setback and its observation); 0 for a trajectory sampled whole.
	BranchAt int
	// Forced is set on a continuation Branch started with tokens the
	// policy did not sample: ForcedOpener, or a whole look and the opener
	// after its observation (Runner.ForceLook; ForcedLook is then set).
	// ForcedSpans are those tokens' [from, to) ranges in Tokens.
	Forced      bool
	ForcedLook  bool
	ForcedSpans [][2]int
}

// Job is one task and the sandbox factory of its fixture.
type Job struct {
	Task    *task.Task
	Factory *sandbox.Factory
}

// Run runs Config.NumGenerations trajectories of every job concurrently,
// batching the policy's sampling across all of them, and scores each with
// Rewards. The result holds the trajectories of job j at [j*N, (j+1)*N). A
// trajectory that fails (its sandbox could not be forked, a tool server
// crashed) ends with Error set; only a policy failure or a cancelled
// context ends the run.
func (r *Runner) Run(ctx context.Context, jobs []Job) ([]*Result, error) {
	n := r.Config.NumGenerations
	if n <= 0 {
		n = 1
	}
	stops, err := r.stopIDs()
	if err != nil {
		return nil, err
	}
	opts := r.Config.Sample
	opts.StopIDs = append(append([]int(nil), opts.StopIDs...), stops.all...)

	states := make([]*state, len(jobs)*n)
	for j, job := range jobs {
		st, err := r.prompt(job)
		if err != nil {
			return nil, fmt.Errorf("task %q: %w", job.Task.ID, err)
		}
		for g := 0; g < n; g++ {
			s := &state{job: job, messages: append([]chat.Message(nil), st.messages...), tools: st.tools, offered: st.offered, res: &Result{Trajectory: &chat.Trajectory{}, Task: job.Task}}
			s.traj = s.res.Trajectory
			s.traj.Tokens = append([]int(nil), st.ids...)
			s.traj.Mask = make([]uint8, len(st.ids))
			s.traj.OldLogProbs = make([]float32, len(st.ids))
			s.traj.PromptLen = len(st.ids)
			s.open = job.Factory.Fork
			states[j*n+g] = s
		}
	}
	return r.run(ctx, states, opts, stops)
}

// Branch samples n continuations of every root that met a setback
// (Result.Setback; the others are skipped), each in its own fork of the
// sandbox as the setback left it, from the root's tokens up to and
// including the setback's observation. Each continuation is a whole
// trajectory (the root's prefix, then its own turns), scored by Rewards
// as any other; Result.BranchAt says where its own tokens start. The
// result holds the continuations of the k-th root with a setback at
// [k*n, (k+1)*n). The setbacks stay open: their holder closes them.
//
// The first forced (at most n) continuations of each root begin their
// first turn with the tool-call opener (ForcedOpener): a retry the policy
// is made to try, whatever it would have chosen. The opener's tokens are
// not the policy's samples: they carry Mask 0 (nothing trains them) and
// Result.Forced is set; the call the policy writes after them is its own.
// With Runner.ForceLook the forced tokens are a whole call, the look the
// setback suggests, which runs before the policy samples, and the opener
// after its observation. Forcing needs a policy that samples tokens (not a
// Conversational one).
func (r *Runner) Branch(ctx context.Context, roots []*Result, n, forced int) ([]*Result, error) {
	stops, err := r.stopIDs()
	if err != nil {
		return nil, err
	}
	opts := r.Config.Sample
	opts.StopIDs = append(append([]int(nil), opts.StopIDs...), stops.all...)
	opener := r.Tokenizer.Encode(ForcedOpener)
	var states []*state
	for _, root := range roots {
		sb := root.Setback
		if sb == nil {
			continue
		}
		for k := range n {
			tr := root.Trajectory
			res := &Result{Task: root.Task, BranchAt: sb.Len, Trajectory: &chat.Trajectory{
				Tokens:      append([]int(nil), tr.Tokens[:sb.Len]...),
				Mask:        append([]uint8(nil), tr.Mask[:sb.Len]...),
				OldLogProbs: append([]float32(nil), tr.OldLogProbs[:sb.Len]...),
				PromptLen:   tr.PromptLen,
				Turns:       cloneTurns(tr.Turns[:sb.Turn+1]),
			}}
			s := &state{
				job: sb.job, messages: append([]chat.Message(nil), sb.messages...), tools: sb.tools, offered: sb.offered,
				res: res, traj: res.Trajectory, rounds: sb.rounds, open: sb.sb.Fork,
			}
			switch {
			case k >= forced:
			case r.ForceLook && sb.look != "":
				res.Forced, res.ForcedLook = true, true
				s.forcedCall = r.Tokenizer.Encode(sb.look)
				res.ForcedSpans = [][2]int{{sb.Len, sb.Len + len(s.forcedCall)}}
				s.opener = opener
			default:
				res.Forced, res.ForcedSpans = true, [][2]int{{sb.Len, sb.Len + len(opener)}}
				s.forced = opener
				res.Tokens = append(res.Tokens, opener...)
				res.Mask = append(res.Mask, make([]uint8, len(opener))...)
				res.OldLogProbs = append(res.OldLogProbs, make([]float32, len(opener))...)
			}
			states = append(states, s)
		}
	}
	if len(states) == 0 {
		return nil, nil
	}
	return r.run(ctx, states, opts, stops)
}

// ForcedOpener is the text a forced continuation (Branch) starts its
// first turn with: a tool call's opening tag and the newline the chat
// templates write after it.
const ForcedOpener = toolcall.OpenTag + "\n"

// cloneTurns copies turns deeply enough that a continuation's changes
// never reach its root.
func cloneTurns(turns []chat.Turn) []chat.Turn {
	out := make([]chat.Turn, len(turns))
	for i, t := range turns {
		out[i] = t
		out[i].Calls = append([]chat.CallResult(nil), t.Calls...)
	}
	return out
}

// run opens every state's sandbox and samples the states' trajectories to
// their ends, batching the policy's sampling across all of them.
func (r *Runner) run(ctx context.Context, states []*state, opts policy.SampleOptions, stops *stopSet) (_ []*Result, err error) {
	defer func() {
		if err != nil { // nobody will hold the setbacks
			for _, s := range states {
				s.res.Setback.Close()
			}
		}
	}()
	var finishing sync.WaitGroup
	defer finishing.Wait()
	var end func(s *state)
	// However the run returns, every trajectory still in flight is ended:
	// its sandbox is closed (after Finish) before Run returns.
	defer func() {
		for _, s := range states {
			if !s.done {
				if s.traj.Error == "" && ctx.Err() != nil {
					s.traj.Error = fmt.Sprintf("rollout stopped: %v", ctx.Err())
				}
				end(s)
			}
		}
	}()
	end = func(s *state) {
		s.done = true
		finishing.Add(1)
		go func() {
			defer finishing.Done()
			if s.sb != nil {
				r.score(ctx, s.res, s.sb)
			}
			if s.sb != nil {
				s.sb.Close()
			}
		}()
	}
	// Fork every sandbox concurrently.
	var wg sync.WaitGroup
	for _, s := range states {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := s.open(ctx)
			if err != nil {
				s.traj.Error = fmt.Sprintf("sandbox fork: %v", err)
				return
			}
			s.sb = sb
		}()
	}
	wg.Wait()
	for _, s := range states {
		if s.sb == nil {
			end(s)
		}
	}
	// Forced whole calls (Runner.ForceLook) run before the policy samples;
	// their observations and the retry's opener after them are part of the
	// prompts.
	for _, s := range states {
		if s.forcedCall == nil || s.done {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := len(s.traj.Tokens)
			s.forcedObs = r.turn(ctx, s, policy.Sample{IDs: s.forcedCall, Stopped: true}, stops)
			clear(s.traj.Mask[from : from+len(s.forcedCall)]) // not the policy's samples
			if s.forcedObs != nil {
				t := s.traj
				s.forced = s.opener
				s.res.ForcedSpans = append(s.res.ForcedSpans, [2]int{len(t.Tokens), len(t.Tokens) + len(s.opener)})
				t.Tokens = append(t.Tokens, s.opener...)
				t.Mask = append(t.Mask, make([]uint8, len(s.opener))...)
				t.OldLogProbs = append(t.OldLogProbs, make([]float32, len(s.opener))...)
			}
		}()
	}
	wg.Wait()
	for _, s := range states {
		if s.forcedCall != nil && !s.done && s.forcedObs == nil {
			end(s)
		}
	}
	prompts := make([][]int, len(states))
	for i, s := range states {
		prompts[i] = append([]int(nil), s.traj.Tokens...)
	}

	batch, err := r.Policy.NewBatch(ctx, prompts, opts)
	if err != nil {
		for _, s := range states {
			if !s.done {
				end(s)
			}
		}
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer batch.Close()
	conv, _ := batch.(policy.Conversational)
	if conv != nil {
		for _, s := range states {
			if s.res.Forced {
				return nil, errors.New("policy: a forced continuation needs a policy that samples tokens, not a conversational one")
			}
		}
	}

	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		maxNew := make([]int, len(states))
		active := 0
		for i, s := range states {
			if s.done {
				continue
			}
			left := r.Config.MaxCompletionLength - s.completionLen()
			if left <= 0 {
				s.traj.Truncated = true
				end(s)
				continue
			}
			maxNew[i] = left
			active++
		}
		if active == 0 {
			break
		}
		if conv != nil {
			for i, s := range states {
				if maxNew[i] == 0 {
					continue
				}
				if err := conv.SetConversation(i, policy.Conversation{Messages: s.messages, Tools: s.offered, ToolsInPrompt: s.tools != nil}); err != nil {
					return nil, fmt.Errorf("policy: %w", err)
				}
			}
		}
		samples, err := batch.Generate(ctx, maxNew)
		if err != nil {
			for _, s := range states {
				if !s.done {
					s.traj.Error = fmt.Sprintf("policy: %v", err)
					end(s)
				}
			}
			return nil, fmt.Errorf("policy: %w", err)
		}
		// Each active trajectory handles its turn (parse, call tools,
		// build the observation) concurrently with the others.
		obs := make([][]int, len(states))
		for i, s := range states {
			if maxNew[i] == 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				obs[i] = r.turn(ctx, s, samples[i], stops)
			}()
		}
		wg.Wait()
		for i, s := range states {
			if maxNew[i] == 0 {
				continue
			}
			if s.done || obs[i] == nil {
				if !s.done {
					end(s)
				}
				continue
			}
			if err := batch.Append(i, obs[i]); err != nil {
				return nil, fmt.Errorf("policy: append observation: %w", err)
			}
		}
	}
	finishing.Wait()
	out := make([]*Result, len(states))
	for i, s := range states {
		out[i] = s.res
	}
	return out, ctx.Err()
}

// score scores res with every reward while its sandbox is open.
func (r *Runner) score(ctx context.Context, res *Result, sb *sandbox.Sandbox) {
	if len(r.Rewards) == 0 {
		return
	}
	res.Scores = make([]reward.Score, len(r.Rewards))
	res.Errs = make([]error, len(r.Rewards))
	in := &reward.Input{Task: res.Task, Trajectory: res.Trajectory, Sandbox: sb}
	for k, f := range r.Rewards {
		res.Scores[k], res.Errs[k] = f.Score(ctx, in)
	}
}

// state is one trajectory in flight.
type state struct {
	job      Job
	open     func(context.Context) (*sandbox.Sandbox, error) // forks the trajectory's sandbox
	sb       *sandbox.Sandbox
	messages []chat.Message
	tools    []json.RawMessage // the tools the chat template renders (none under a task's system prompt)
	offered  []json.RawMessage // the sandbox's tools, as a conversational policy receives them
	res      *Result
	traj     *chat.Trajectory // res.Trajectory
	rounds   int
	done     bool
	forced   []int // ForcedOpener's ids, which Branch put before the first turn's samples; nil once that turn ends

	forcedCall []int // a whole call Branch forces (Runner.ForceLook), run before the policy samples
	forcedObs  []int // its observation; nil when the trajectory ended there
	opener     []int // ForcedOpener's ids, forced after forcedCall's observation
}

func (s *state) completionLen() int { return len(s.traj.Tokens) - s.traj.PromptLen }

type promptState struct {
	messages []chat.Message
	tools    []json.RawMessage
	offered  []json.RawMessage
	ids      []int
}

// prompt renders a job's chat: the task's system prompt, or, when it has
// none, the chat template's own tool section built from the sandbox's
// tools/list; then the task as the user's message.
func (r *Runner) prompt(job Job) (*promptState, error) {
	st := &promptState{}
	st.messages, st.tools = PromptMessages(job.Task, job.Factory)
	if st.offered = st.tools; st.offered == nil {
		st.offered = toolcall.FunctionSchemas(job.Factory.Tools())
	}
	text, err := r.Template.Render(st.messages, st.tools, true)
	if err != nil {
		return nil, fmt.Errorf("render prompt: %w", err)
	}
	ids := r.Tokenizer.Encode(text)
	if m := r.Config.MaxPromptLength; m > 0 && len(ids) > m {
		ids = ids[len(ids)-m:]
	}
	st.ids = ids
	return st, nil
}

// PromptMessages is the chat a trajectory of t starts from, for the chat template: the task's system prompt, or,
// when it has none, no system message and the sandbox's tools (f's tools/list as function schemas) for the
// template's own tool section; then the task as the user's message.
func PromptMessages(t *task.Task, f *sandbox.Factory) ([]chat.Message, []json.RawMessage) {
	var messages []chat.Message
	var tools []json.RawMessage
	if t.SystemPrompt != "" {
		messages = append(messages, chat.Message{Role: "system", Content: t.SystemPrompt})
	} else {
		tools = toolcall.FunctionSchemas(f.Tools())
	}
	return append(messages, chat.Message{Role: "user", Content: t.Task}), tools
}

type stopSet struct {
	endTurn  map[int]bool // end of the assistant's message: a final answer
	toolStop int          // </tool_call>
	all      []int
}

func (r *Runner) stopIDs() (*stopSet, error) {
	s := &stopSet{endTurn: map[int]bool{}}
	for _, name := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := r.Tokenizer.TokenID(name); ok {
			s.endTurn[id] = true
			s.all = append(s.all, id)
		}
	}
	if id := r.Tokenizer.EOS(); id >= 0 && !s.endTurn[id] {
		s.endTurn[id] = true
		s.all = append(s.all, id)
	}
	id, ok := r.Tokenizer.TokenID("</tool_call>")
	if !ok {
		return nil, fmt.Errorf("tokenizer has no </tool_call> token")
	}
	s.toolStop = id
	s.all = append(s.all, s.toolStop)
	return s, nil
}

// turn records one sampled turn of s and, when it ends in a tool call,
// runs the calls and returns the observation tokens to append. It returns
// nil when the trajectory is over.
func (r *Runner) turn(ctx context.Context, s *state, sample policy.Sample, stops *stopSet) []int {
	t := s.traj
	if sample.Err != nil {
		// The policy could not continue this trajectory (a served model's
		// request failed): it ends with the reason, unscored.
		t.Error = fmt.Sprintf("policy: %v", sample.Err)
		return nil
	}
	if len(sample.IDs) == 0 {
		// Nothing sampled: the policy had no room left (a full cache).
		t.Truncated = true
		return nil
	}
	t.Tokens = append(t.Tokens, sample.IDs...)
	for k := range sample.IDs {
		t.Mask = append(t.Mask, 1)
		lp := float32(0)
		if k < len(sample.LogProbs) {
			lp = sample.LogProbs[k]
		}
		t.OldLogProbs = append(t.OldLogProbs, lp)
	}
	ids := sample.IDs
	last := -1
	if len(ids) > 0 {
		last = ids[len(ids)-1]
	}
	if sample.Stopped && stops.endTurn[last] {
		ids = ids[:len(ids)-1]
	}
	if s.forced != nil { // the opener Branch put before this turn's samples
		ids = append(append([]int(nil), s.forced...), ids...)
		s.forced = nil
	}
	text := r.Tokenizer.Decode(ids)
	turn := chat.Turn{Text: text}
	parsed := toolcall.Parse(text)
	for _, p := range parsed {
		c := chat.CallResult{Call: p.Call}
		if p.Err != nil {
			c.ParseError = p.Err.Error()
			c.IsError = true
			c.Text = "error: " + p.Err.Error()
		}
		turn.Calls = append(turn.Calls, c)
	}
	t.Turns = append(t.Turns, turn)
	cur := &t.Turns[len(t.Turns)-1]

	if sample.Stopped && last == stops.toolStop && len(cur.Calls) == 0 {
		// A </tool_call> with no <tool_call> before it: a malformed call
		// the model reads about, like any other.
		msg := toolcall.CloseTag + " without an opening " + toolcall.OpenTag + ": write a call as " +
			toolcall.OpenTag + `{"name": TOOL, "arguments": {...}}` + toolcall.CloseTag
		cur.Calls = append(cur.Calls, chat.CallResult{ParseError: msg, IsError: true, Text: "error: " + msg})
	}

	switch {
	case !sample.Stopped:
		t.Truncated = true
		t.Answer = toolcall.StripCalls(text)
		return nil
	case last != stops.toolStop:
		t.Answer, t.Stopped = toolcall.StripCalls(text), true
		return nil
	case s.rounds >= r.Config.MaxToolCallingIterations:
		t.Truncated = true
		for k := range cur.Calls {
			cur.Calls[k].NotRun = cur.Calls[k].ParseError == ""
		}
		return nil
	}
	s.rounds++

	// Run the turn's calls in order: a later call may depend on an
	// earlier one's effect on the sandbox.
	toolMsgs := make([]chat.Message, 0, len(cur.Calls))
	for k := range cur.Calls {
		c := &cur.Calls[k]
		if c.ParseError == "" {
			res, err := s.sb.Call(ctx, c.Call.Name, c.Call.Arguments)
			if err != nil {
				t.Error = fmt.Sprintf("tool %s: %v", c.Call.Name, err)
				return nil
			}
			if lost := s.sb.Lost(); lost != nil {
				// The database was reset under the trajectory: what follows
				// would not be the policy's doing.
				c.IsError, c.Text = true, sandbox.ResultText(res)
				t.Error = fmt.Sprintf("tool %s: the sandbox's database fork was lost and reset to the fixture: %v", c.Call.Name, lost)
				return nil
			}
			c.IsError = res.IsError
			c.Text = sandbox.ResultText(res)
			c.Structured = res.StructuredContent
		}
		toolMsgs = append(toolMsgs, chat.Message{Role: "tool", Content: c.Text, Name: c.Call.Name})
	}
	obsText, err := r.observation(s, text, toolMsgs)
	if err != nil {
		t.Error = err.Error()
		return nil
	}
	obs := r.Tokenizer.Encode(obsText)
	if s.completionLen()+len(obs) >= r.Config.MaxCompletionLength {
		t.Truncated = true
		return nil
	}
	t.Tokens = append(t.Tokens, obs...)
	for range obs {
		t.Mask = append(t.Mask, 0)
		t.OldLogProbs = append(t.OldLogProbs, 0)
	}
	s.messages = append(s.messages, chat.Message{Role: "assistant", Content: text})
	s.messages = append(s.messages, toolMsgs...)
	if r.Branching != nil && s.res.Setback == nil && s.res.BranchAt == 0 {
		for _, c := range cur.Calls {
			if trig := r.Branching.Match(c); trig != "" {
				s.res.Setback = r.setback(ctx, s, trig, c)
				break
			}
		}
	}
	return obs
}

// setback snapshots s at a setback: its sandbox forked as the calls left
// it, and what the loop needs to continue from here. A snapshot that
// cannot be made is no setback to branch at (nil).
func (r *Runner) setback(ctx context.Context, s *state, trigger string, c chat.CallResult) *Setback {
	sb, err := s.sb.Fork(ctx)
	if err != nil {
		return nil
	}
	return &Setback{
		Turn: len(s.traj.Turns) - 1, Trigger: trigger, Len: len(s.traj.Tokens),
		sb: sb, job: s.job, messages: append([]chat.Message(nil), s.messages...),
		tools: s.tools, offered: s.offered, rounds: s.rounds, look: lookAfter(c, trigger),
	}
}

// observation renders the text the chat template puts between the
// assistant's sampled text and the next assistant turn: the end of the
// assistant's message, the tool responses, and the next generation prompt.
// It is the template's own form, cut out of two renders.
func (r *Runner) observation(s *state, assistant string, toolMsgs []chat.Message) (string, error) {
	before, err := r.Template.Render(s.messages, s.tools, true)
	if err != nil {
		return "", fmt.Errorf("render chat: %w", err)
	}
	msgs := append(append(append([]chat.Message(nil), s.messages...), chat.Message{Role: "assistant", Content: assistant}), toolMsgs...)
	after, err := r.Template.Render(msgs, s.tools, true)
	if err != nil {
		return "", fmt.Errorf("render chat: %w", err)
	}
	head := before + assistant
	if !strings.HasPrefix(after, head) {
		return "", fmt.Errorf("chat template re-renders earlier turns differently; cannot append tool output token-in, token-out")
	}
	return after[len(head):], nil
}
