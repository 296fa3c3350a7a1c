package main

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

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/internal/pycompat"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

// scoreOptions are the flags of `mcprl score`.
type scoreOptions struct {
	rewards     string
	tasks       string
	completions string
	fixtures    string
	dsn         string
	workers     int
	seedConfig  string
	output      string
}

func newScoreCmd() *cobra.Command {
	var o scoreOptions
	cmd := &cobra.Command{
		Use:   "score --reward NAME[,NAME...] --completions FILE [--tasks FILE] [--fixtures DIR] [--dsn DSN] [--workers N]",
		Short: "Score completions with reward functions, one JSON line per completion",
		Long: `score reads completions as JSONL, {"task_id": "...", "completion": "..."} per line (the completion is the
assistant's text, tool-call tags included), scores each with the named rewards and writes one JSON line per
completion, in input order:
  {"index": I, "task_id": "...", "reward": R, "breakdown": {"NAME": {"weight": W, "score": S, "reason": ..., "checks": [...]}}}
Several rewards are summed with their weights: --reward format:0.3,tool_selection:0.3,execution:0.4,hallucination:0.5
(NAME alone weighs 1). A bad line is reported on stderr with its line number and written as
{"index": I, "line": N, "reward": null, "error": "..."}; the run goes on.

Rewards that read tool results or the database ("assertions", "execution", "verifiable") run each completion's
tool calls, in order, in a fresh fork of its task's sandbox (--tasks and --fixtures needed; --dsn for
PostgreSQL, embedded SQLite otherwise), then check against that fork. "seed" needs neither and is fast.

Rewards: ` + rewardList() + `

Example:
  mcprl score --reward seed --completions completions.jsonl
  mcprl score --reward verifiable --tasks examples/customers/tasks.jsonl --fixtures examples/fixtures --completions c.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if o.output != "" && o.output != "-" {
				f, err := os.Create(o.output)
				if err != nil {
					return err
				}
				defer f.Close()
				out = f
			}
			return runScore(cmd.Context(), o, out, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.rewards, "reward", "seed", "comma-separated rewards, each NAME or NAME:WEIGHT")
	f.StringVar(&o.tasks, "tasks", "", "tasks JSONL (task_id lookup: assertions, per-task settings)")
	f.StringVar(&o.completions, "completions", "", `completions JSONL, {"task_id", "completion"} per line ("-" for stdin)`)
	f.StringVar(&o.fixtures, "fixtures", "", "directory of fixture directories (for rewards that run tool calls)")
	f.StringVar(&o.dsn, "dsn", "", "PostgreSQL DSN for sandboxes (default: embedded SQLite)")
	f.IntVar(&o.workers, "workers", 0, "completions scored in parallel (default: number of CPUs)")
	f.StringVar(&o.seedConfig, "seed-config", "", `JSON file of seed settings: {"default": {"catalog": [...], "keyword": "..."}, "tasks": {"ID": {...}}}`)
	f.StringVarP(&o.output, "output", "o", "", "write the scores to this file instead of stdout")
	_ = cmd.MarkFlagRequired("completions")
	return cmd
}

func rewardList() string {
	r := reward.NewRegistry()
	var b bytes.Buffer
	for _, n := range r.Names() {
		fmt.Fprintf(&b, "\n  %-15s %s", n, r.Doc(n))
	}
	return b.String()
}

// seedFile is the --seed-config file.
type seedFile struct {
	Default reward.SeedConfig            `json:"default"`
	Tasks   map[string]reward.SeedConfig `json:"tasks"`
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

// scorer scores one completion into its output line.
type scorer struct {
	fn    reward.Func
	tasks map[string]*task.Task
	live  *liveRunner  // nil when no reward needs tool results
	seed  *reward.Seed // set when fn is the seed reward alone (fast path)
	// seedTails are the output line endings of the seed's five outcomes.
	seedTails map[string][]byte
}

// seedTail is the end of an output line, from "reward" on, for a seed result.
func (s *scorer) seedTail(r reward.SeedResult) []byte {
	if r.PythonError == "" {
		if t, ok := s.seedTails[r.Stage]; ok {
			return t
		}
	}
	sc := reward.Score{Value: r.Value, Reason: r.Stage}
	if r.PythonError != "" {
		sc.Reason += " (Python raises " + r.PythonError + ")"
	}
	var b []byte
	b = append(b, `,"reward":`...)
	b = append(b, reward.FormatFloat(sc.Value)...)
	b = append(b, `,"breakdown":`...)
	b = append(b, reward.Breakdown("seed", sc)...)
	return append(b, "}\n"...)
}

func runScore(ctx context.Context, o scoreOptions, stdout, stderr io.Writer) error {
	reg := reward.NewRegistry()
	fn, err := reg.Parse(o.rewards)
	if err != nil {
		return err
	}
	s := &scorer{fn: fn, tasks: map[string]*task.Task{}}
	if sd, ok := fn.(*reward.Seed); ok {
		s.seed = sd
		s.seedTails = map[string][]byte{}
		for _, r := range []reward.SeedResult{{Value: 0.0, Stage: reward.StageNoTag}, {Value: 0.1, Stage: reward.StageBadJSON},
			{Value: -0.5, Stage: reward.StageUnknownTool}, {Value: 0.3 + 0.3, Stage: reward.StageKnownTool},
			{Value: 0.3 + 0.3 + 0.4, Stage: reward.StageKeyword}} {
			s.seedTails[r.Stage] = s.seedTail(r)
		}
	}
	fixtures := map[string]*task.Fixture{}
	if o.fixtures != "" {
		if fixtures, err = task.LoadFixtures(o.fixtures); err != nil {
			return err
		}
	}
	if o.tasks != "" {
		ts, err := task.Load(o.tasks, task.LoadOptions{Fixtures: fixtures})
		if err != nil {
			return err
		}
		for i := range ts {
			t := &ts[i]
			if t.ID == "" {
				t.ID = strconv.Itoa(i + 1)
			}
			s.tasks[t.ID] = t
		}
	}
	if o.seedConfig != "" {
		data, err := os.ReadFile(o.seedConfig)
		if err != nil {
			return err
		}
		var sf seedFile
		if err := json.Unmarshal(data, &sf); err != nil {
			return fmt.Errorf("%s: %w", o.seedConfig, err)
		}
		if err := applySeedConfig(fn, sf); err != nil {
			return err
		}
	}
	if reward.NeedsSandbox(fn) {
		if o.tasks == "" || o.fixtures == "" {
			return fmt.Errorf("reward %q runs tool calls against the task's sandbox: give --tasks and --fixtures", o.rewards)
		}
		s.live = newLiveRunner(fixtures, o.dsn)
		defer s.live.Close()
	}
	var in io.Reader
	name := o.completions
	if o.completions == "-" {
		in, name = os.Stdin, "stdin"
	} else {
		f, err := os.Open(o.completions)
		if err != nil {
			return fmt.Errorf("read completions: %w", err)
		}
		defer f.Close()
		in = f
	}
	workers := o.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Lines go to workers in chunks (one line each when tool calls run, so
	// slow completions spread over the workers) and come back in order.
	maxLines := 4096
	if s.live != nil {
		maxLines = 1
	}
	return scoreStream(ctx, in, name, stdout, stderr, workers, maxLines, s)
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
func scoreStream(ctx context.Context, in io.Reader, name string, out, errw io.Writer, workers, maxLines int, s *scorer) error {
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
func (s *scorer) scoreChunk(ctx context.Context, dec *pycompat.Decoder, c *chunk) {
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

func applySeedConfig(fn reward.Func, sf seedFile) error {
	found := false
	visit := func(f reward.Func) {
		if s, ok := f.(*reward.Seed); ok {
			found = true
			s.Config = s.Config.Overlay(sf.Default)
			s.PerTask = func(t *task.Task) (reward.SeedConfig, bool) {
				c, ok := sf.Tasks[t.ID]
				return c, ok
			}
		}
	}
	visit(fn)
	if w, ok := fn.(*reward.Weighted); ok {
		for _, t := range w.Terms() {
			visit(t.Func)
		}
	}
	if !found {
		return fmt.Errorf("--seed-config given but no seed reward requested")
	}
	return nil
}

// score appends the output line of completion index i to buf. Problems
// of the line (bad JSON, unknown task, a failing tool server) become an
// error line; only a cancelled context is returned as an error.
func (s *scorer) score(ctx context.Context, buf []byte, i int, c completionLine) ([]byte, error) {
	if c.err != nil {
		return errorLine(buf, i, c, c.err.Error()), nil
	}
	t := s.tasks[c.taskID]
	if t == nil && len(s.tasks) > 0 {
		return errorLine(buf, i, c, fmt.Sprintf("unknown task_id %q", c.taskID)), nil
	}
	if s.seed != nil {
		if t == nil && s.seed.PerTask != nil {
			t = &task.Task{ID: c.taskID} // per-task settings by task_id, without a tasks file
		}
		r := s.seed.ScoreText(t, c.completion)
		buf = append(buf, `{"index":`...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, `,"task_id":`...)
		buf = appendJSONString(buf, c.taskID)
		return append(buf, s.seedTail(r)...), nil
	}
	in := &reward.Input{Task: t}
	if s.live != nil {
		sb, traj, err := s.live.run(ctx, t, c.completion)
		if err != nil {
			if ctx.Err() != nil {
				return buf, ctx.Err()
			}
			return errorLine(buf, i, c, err.Error()), nil
		}
		defer sb.Close()
		in.Trajectory = traj
		in.Sandbox = sb
		in.Catalog = toolNames(sb)
	} else {
		in.Trajectory = textTrajectory(c.completion)
	}
	sc, err := s.fn.Score(ctx, in)
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
	buf = append(buf, reward.FormatFloat(sc.Value)...)
	buf = append(buf, `,"breakdown":`...)
	buf = append(buf, reward.Breakdown(s.fn.Name(), sc)...)
	buf = append(buf, "}\n"...)
	return buf, nil
}

// textTrajectory is a one-turn trajectory of a completion whose calls were
// parsed but not run.
func textTrajectory(text string) *chat.Trajectory {
	turn := chat.Turn{Text: text}
	for _, p := range toolcall.Parse(text) {
		cr := chat.CallResult{Call: p.Call}
		if p.Err != nil {
			cr.ParseError = p.Err.Error()
		}
		turn.Calls = append(turn.Calls, cr)
	}
	return &chat.Trajectory{Turns: []chat.Turn{turn}, Answer: toolcall.StripCalls(text)}
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
