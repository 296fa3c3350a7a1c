package reward

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/internal/pycompat"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// MCPRewardFile holds compute_mcp_reward settings for a run (mcprl score --mcp-reward-config): a
// default overlaid on the user's, and settings per task ID.
type MCPRewardFile struct {
	Default MCPRewardConfig            `json:"default"`
	Tasks   map[string]MCPRewardConfig `json:"tasks"`
}

// ReadMCPRewardFile reads a MCPRewardFile from JSON.
func ReadMCPRewardFile(path string) (*MCPRewardFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sf MCPRewardFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &sf, nil
}

// completionLine is one parsed line of the completions file.
type completionLine struct {
	line       int // 1-based line number
	taskID     string
	completion string
	err        error
}

// parseCompletion decodes one line as Python's json.loads would (so that
// a completion holding a lone surrogate escape reads the same as for the
// Python reward function). The strings share dec's scratch memory: they
// are valid until dec decodes the next line.
func parseCompletion(dec *pycompat.Decoder, raw string, line int) completionLine {
	c := completionLine{line: line}
	var vals [2]string
	var found [2]bool
	var kinds [2]pycompat.Kind
	if err := dec.Fields(strings.TrimSuffix(raw, "\r"), completionKeys, vals[:], found[:], kinds[:]); err != nil {
		if e, ok := err.(*pycompat.Error); ok && e.Class == "TypeError" {
			c.err = errors.New(e.Msg)
		} else {
			c.err = fmt.Errorf("not a JSON line: %v", err)
		}
		return c
	}
	switch {
	case found[0] && kinds[0] != pycompat.StrKind:
		c.err = fmt.Errorf(`"task_id" must be a string, got %s`, kinds[0].TypeName())
	case !found[1]:
		c.err = fmt.Errorf(`missing "completion"`)
	case kinds[1] != pycompat.StrKind:
		c.err = fmt.Errorf(`"completion" must be a string, got %s`, kinds[1].TypeName())
	default:
		c.taskID, c.completion = vals[0], vals[1]
	}
	return c
}

var completionKeys = []string{"task_id", "completion"}

// Completions scores a JSONL stream of completions, {"task_id": "...",
// "completion": "..."} per line (the assistant's text, tool-call tags
// included), with Func, on Workers goroutines, and writes one JSON line per
// completion in input order:
//
//	{"index": I, "task_id": "...", "reward": R, "breakdown": {"NAME": {"weight": W, "score": S, "reason": ..., "checks": [...]}}}
//
// A bad line (bad JSON, an unknown task, a failing tool server) is written
// as {"index": I, "line": N, "task_id": ..., "reward": null, "error": "..."}
// and reported; the run goes on.
type Completions struct {
	Func Func
	// Tasks maps task IDs to tasks; empty, any task_id is accepted.
	Tasks map[string]*task.Task
	// Fork returns a fresh sandbox of a task's fixture, in which each
	// completion's well-formed calls run, in order, before Func scores it.
	// Needed when Func reads tool results (NeedsSandbox); nil otherwise.
	Fork func(ctx context.Context, t *task.Task) (LiveSandbox, error)
	// Workers is the number of completions scored in parallel (0: the
	// number of CPUs).
	Workers int

	factories *sandbox.Factories // started by OpenCompletions; Close frees them

	mcp *MCPReward // set when Func is compute_mcp_reward alone (fast path)
	// mcpTails are the output line endings of compute_mcp_reward's five outcomes.
	mcpTails map[string][]byte
}

// LiveSandbox is a sandbox a completion's calls run in, then closed; a
// *sandbox.Sandbox is one.
type LiveSandbox interface {
	Sandbox
	Caller
	Close() error
}

// mcpTail is the end of an output line, from "reward" on, for a compute_mcp_reward result.
func (s *Completions) mcpTail(r MCPRewardResult) []byte {
	if r.PythonError == "" {
		if t, ok := s.mcpTails[r.Stage]; ok {
			return t
		}
	}
	sc := Score{Value: r.Value, Reason: r.Stage}
	if r.PythonError != "" {
		sc.Reason += " (Python raises " + r.PythonError + ")"
	}
	var b []byte
	b = append(b, `,"reward":`...)
	b = append(b, FormatFloat(sc.Value)...)
	b = append(b, `,"breakdown":`...)
	b = append(b, Breakdown(MCPRewardName, sc)...)
	return append(b, "}\n"...)
}

// Score reads the completions from in (named name in reports), writes
// their scores to out and reports bad lines to errw.
func (s *Completions) Score(ctx context.Context, in io.Reader, name string, out, errw io.Writer) error {
	if NeedsSandbox(s.Func) && s.Fork == nil {
		return fmt.Errorf("reward %s runs tool calls against the task's sandbox: no sandboxes to fork", s.Func.Name())
	}
	s.mcp, s.mcpTails = nil, nil
	if sd, ok := s.Func.(*MCPReward); ok {
		s.mcp = sd
		s.mcpTails = map[string][]byte{}
		for _, r := range []MCPRewardResult{{Value: 0.0, Stage: StageNoTag}, {Value: 0.1, Stage: StageBadJSON},
			{Value: -0.5, Stage: StageUnknownTool}, {Value: 0.3 + 0.3, Stage: StageKnownTool},
			{Value: 0.3 + 0.3 + 0.4, Stage: StageKeyword}} {
			s.mcpTails[r.Stage] = s.mcpTail(r)
		}
	}
	workers := s.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Lines go to workers in chunks (one line each when tool calls run, so
	// slow completions spread over the workers) and come back in order.
	maxLines := 4096
	if NeedsSandbox(s.Func) {
		maxLines = 1
	}
	return scoreStream(ctx, in, name, out, errw, workers, maxLines, s)
}

// chunk is a run of whole lines of the input and, once scored, its output.
type chunk struct {
	seq        int
	data       []byte // input lines
	firstLine  int    // line number of the chunk's first line
	firstIndex int    // index of its first non-blank line
	out        []byte // output lines
	errs       []string
	err        error
}

// scoreStream reads JSONL from in, scores it on workers goroutines and
// writes the results to out in input order, reporting bad lines to errw.
func scoreStream(ctx context.Context, in io.Reader, name string, out, errw io.Writer, workers, maxLines int, s *Completions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	todo := make(chan *chunk, 2*workers)
	done := make(chan *chunk, 2*workers)
	pool := sync.Pool{New: func() any {
		if maxLines == 1 { // one completion a chunk: let each buffer grow to its line
			return new(chunk)
		}
		return &chunk{data: make([]byte, 0, chunkSize+chunkSize/4), out: make([]byte, 0, chunkSize/2)}
	}}
	readErr := make(chan error, 1)
	go func() { readErr <- readChunks(ctx, in, maxLines, todo, &pool) }()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dec pycompat.Decoder
			for c := range todo {
				s.scoreChunk(ctx, &dec, c)
				done <- c
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	pending := map[int]*chunk{}
	next, bad, total := 0, 0, 0
	var firstErr error
	for c := range done {
		pending[c.seq] = c
		for {
			c, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if c.err != nil && firstErr == nil {
				firstErr = c.err
				cancel()
			}
			if firstErr == nil {
				if _, err := out.Write(c.out); err != nil {
					firstErr = err
					cancel()
				}
				for _, e := range c.errs {
					fmt.Fprintf(errw, "%s:%s\n", name, e)
				}
				bad += len(c.errs)
				total += bytes.Count(c.out, []byte{'\n'})
			}
			pool.Put(c)
		}
	}
	if err := <-readErr; err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return firstErr
	}
	if bad > 0 {
		fmt.Fprintf(errw, "mcprl score: %d of %d lines could not be scored (written with \"error\")\n", bad, total)
	}
	return ctx.Err()
}

// chunkSize is about how much input one chunk holds.
const chunkSize = 1 << 20

// readChunks cuts the input into chunks of whole lines (at most maxLines
// non-blank lines, about 1 MiB) and sends them to todo, then closes it.
func readChunks(ctx context.Context, in io.Reader, maxLines int, todo chan<- *chunk, pool *sync.Pool) error {
	defer close(todo)
	const size = chunkSize
	br := bufio.NewReaderSize(in, size)
	seq, line, index := 0, 1, 0
	var c *chunk
	lines, nonBlank := 0, 0
	send := func() bool {
		select {
		case todo <- c:
		case <-ctx.Done():
			return false
		}
		seq++
		line += lines
		index += nonBlank
		c, lines, nonBlank = nil, 0, 0
		return true
	}
	for {
		if c == nil {
			c = pool.Get().(*chunk)
			c.seq, c.firstLine, c.firstIndex = seq, line, index
			c.data, c.out, c.errs, c.err = c.data[:0], c.out[:0], c.errs[:0], nil
		}
		start := len(c.data)
		l, err := br.ReadSlice('\n')
		for err == bufio.ErrBufferFull { // a line longer than the buffer
			c.data = append(c.data, l...)
			l, err = br.ReadSlice('\n')
		}
		c.data = append(c.data, l...)
		if len(c.data) > start {
			lines++
			if len(bytes.TrimSpace(c.data[start:])) > 0 {
				nonBlank++
			}
		}
		if err == io.EOF {
			if lines > 0 {
				send()
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read completions: %w", err)
		}
		if nonBlank >= maxLines || len(c.data) >= size {
			if !send() {
				return nil
			}
		}
	}
}

// scoreChunk scores every line of c into c.out.
func (s *Completions) scoreChunk(ctx context.Context, dec *pycompat.Decoder, c *chunk) {
	data := c.data
	line, index := c.firstLine, c.firstIndex
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var l []byte
		if i < 0 {
			l, data = data, nil
		} else {
			l, data = data[:i], data[i+1:]
		}
		if len(bytes.TrimSpace(l)) > 0 {
			cl := parseCompletion(dec, unsafe.String(unsafe.SliceData(l), len(l)), line)
			var err error
			start := len(c.out)
			c.out, err = s.score(ctx, c.out, index, cl)
			if err != nil {
				c.err = err
				return
			}
			if isErrorLine(c.out[start:]) {
				c.errs = append(c.errs, fmt.Sprintf("%d: %s", line, lineError(c.out[start:])))
			}
			index++
		}
		line++
	}
}

// isErrorLine reports whether an output line is an error line: after
// {"index":N those go on with "line", scored lines with "task_id".
func isErrorLine(l []byte) bool {
	i := bytes.IndexByte(l, ',')
	return i >= 0 && bytes.HasPrefix(l[i:], []byte(`,"line":`))
}

// lineError extracts the "error" of an output line written by errorLine.
func lineError(l []byte) string {
	i := bytes.Index(l, []byte(`,"error":`))
	if i < 0 {
		return ""
	}
	var e string
	if json.Unmarshal(bytes.TrimRight(l[i+len(`,"error":`):], "}\n"), &e) != nil {
		return "bad line"
	}
	return e
}

// Apply sets sf's settings on every compute_mcp_reward of fn (fn itself, or a
// term of a Weighted).
func (sf *MCPRewardFile) Apply(fn Func) error {
	found := false
	visit := func(f Func) {
		if s, ok := f.(*MCPReward); ok {
			found = true
			s.Config = s.Config.Overlay(sf.Default)
			s.PerTask = func(t *task.Task) (MCPRewardConfig, bool) {
				c, ok := sf.Tasks[t.ID]
				return c, ok
			}
		}
	}
	visit(fn)
	if w, ok := fn.(*Weighted); ok {
		for _, t := range w.Terms() {
			visit(t.Func)
		}
	}
	if !found {
		return fmt.Errorf("compute_mcp_reward settings given but no compute_mcp_reward requested")
	}
	return nil
}

// score appends the output line of completion index i to buf. Problems
// of the line (bad JSON, unknown task, a failing tool server) become an
// error line; only a cancelled context is returned as an error.
func (s *Completions) score(ctx context.Context, buf []byte, i int, c completionLine) ([]byte, error) {
	if c.err != nil {
		return errorLine(buf, i, c, c.err.Error()), nil
	}
	t := s.Tasks[c.taskID]
	if t == nil && len(s.Tasks) > 0 {
		return errorLine(buf, i, c, fmt.Sprintf("unknown task_id %q", c.taskID)), nil
	}
	if s.mcp != nil {
		if t == nil && s.mcp.PerTask != nil {
			t = &task.Task{ID: c.taskID} // per-task settings by task_id, without a tasks file
		}
		r := s.mcp.ScoreText(t, c.completion)
		buf = append(buf, `{"index":`...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, `,"task_id":`...)
		buf = appendJSONString(buf, c.taskID)
		return append(buf, s.mcpTail(r)...), nil
	}
	in := &Input{Task: t}
	if NeedsSandbox(s.Func) {
		sb, traj, err := s.run(ctx, t, c.completion)
		if err != nil {
			if ctx.Err() != nil {
				return buf, ctx.Err()
			}
			return errorLine(buf, i, c, err.Error()), nil
		}
		defer sb.Close()
		in.Trajectory = traj
		in.Sandbox = sb
		in.Catalog = sandbox.ToolNames(sb.Tools())
	} else {
		in.Trajectory, _ = Replay(ctx, nil, c.completion)
	}
	sc, err := s.Func.Score(ctx, in)
	if err != nil {
		if ctx.Err() != nil {
			return buf, ctx.Err()
		}
		return errorLine(buf, i, c, err.Error()), nil
	}
	buf = append(buf, `{"index":`...)
	buf = strconv.AppendInt(buf, int64(i), 10)
	buf = append(buf, `,"task_id":`...)
	buf = appendJSONString(buf, c.taskID)
	buf = append(buf, `,"reward":`...)
	buf = append(buf, FormatFloat(sc.Value)...)
	buf = append(buf, `,"breakdown":`...)
	buf = append(buf, Breakdown(s.Func.Name(), sc)...)
	buf = append(buf, "}\n"...)
	return buf, nil
}

// run executes the completion's well-formed calls in order in a new fork
// of t's sandbox and returns the fork (the caller closes it) and the
// trajectory. A tool server failure ends the trajectory with Error set, as
// a rollout would.
func (s *Completions) run(ctx context.Context, t *task.Task, completion string) (LiveSandbox, *chat.Trajectory, error) {
	if t == nil {
		return nil, nil, errors.New("no task for this completion")
	}
	sb, err := s.Fork(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	traj, err := Replay(ctx, sb, completion)
	if err != nil {
		sb.Close()
		return nil, nil, err
	}
	return sb, traj, nil
}

func errorLine(buf []byte, i int, c completionLine, msg string) []byte {
	buf = append(buf, `{"index":`...)
	buf = strconv.AppendInt(buf, int64(i), 10)
	buf = append(buf, `,"line":`...)
	buf = strconv.AppendInt(buf, int64(c.line), 10)
	buf = append(buf, `,"task_id":`...)
	buf = appendJSONString(buf, c.taskID)
	buf = append(buf, `,"reward":null,"error":`...)
	buf = appendJSONString(buf, msg)
	return append(buf, "}\n"...)
}

// appendJSONString quotes s as JSON (invalid UTF-8, such as a WTF-8 lone
// surrogate, becomes U+FFFD).
func appendJSONString(buf []byte, s string) []byte {
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			simple = false
			break
		}
	}
	if simple {
		buf = append(buf, '"')
		buf = append(buf, s...)
		return append(buf, '"')
	}
	if !utf8.ValidString(s) {
		s = string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
	}
	b, _ := json.Marshal(s)
	return append(buf, b...)
}
