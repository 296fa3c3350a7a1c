package main

import (
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
	"sync/atomic"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/internal/pycompat"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
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

// splitLines returns the non-blank lines of data with their line numbers.
func splitLines(data string) (lines []string, numbers []int) {
	n := 1
	for len(data) > 0 {
		i := strings.IndexByte(data, '\n')
		var l string
		if i < 0 {
			l, data = data, ""
		} else {
			l, data = data[:i], data[i+1:]
		}
		if len(strings.TrimSpace(l)) > 0 {
			lines = append(lines, l)
			numbers = append(numbers, n)
		}
		n++
	}
	return lines, numbers
}

// parseCompletion decodes one line as Python's json.loads would (so that
// a completion holding a lone surrogate escape reads the same as for the
// Python reward function).
func parseCompletion(raw string, line int) completionLine {
	c := completionLine{line: line}
	var vals [2]string
	var found [2]bool
	var kinds [2]pycompat.Kind
	if err := pycompat.LoadsFields(strings.TrimSuffix(raw, "\r"), completionKeys, vals[:], found[:], kinds[:]); err != nil {
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
	var data []byte
	if o.completions == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(o.completions)
	}
	if err != nil {
		return fmt.Errorf("read completions: %w", err)
	}
	lines, numbers := splitLines(string(data))
	out := make([][]byte, len(lines))
	workers := o.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	block := 256
	if s.live != nil {
		block = 1
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var bad atomic.Int64
	var firstErr error
	var errMu sync.Mutex
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for {
				start := int(next.Add(int64(block))) - block
				if start >= len(lines) || ctx.Err() != nil {
					return
				}
				end := min(start+block, len(lines))
				for i := start; i < end; i++ {
					c := parseCompletion(lines[i], numbers[i])
					buf = buf[:0]
					var err error
					buf, err = s.score(ctx, buf, i, c)
					if err != nil {
						errMu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						errMu.Unlock()
						return
					}
					if c.err != nil {
						bad.Add(1)
					}
					out[i] = append([]byte(nil), buf...)
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	name := o.completions
	for i, l := range out {
		if _, err := stdout.Write(l); err != nil {
			return err
		}
		if e := lineError(l); e != "" {
			fmt.Fprintf(stderr, "%s:%d: %s\n", name, numbers[i], e)
		}
	}
	if n := bad.Load(); n > 0 {
		fmt.Fprintf(stderr, "mcprl score: %d of %d lines could not be scored (written with \"error\")\n", n, len(lines))
	}
	return nil
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
			s.Config = mergeSeed(s.Config, sf.Default)
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

func mergeSeed(base, over reward.SeedConfig) reward.SeedConfig {
	if over.Catalog != nil {
		base.Catalog = over.Catalog
	}
	if over.QueryTool != "" {
		base.QueryTool = over.QueryTool
	}
	if over.Argument != "" {
		base.Argument = over.Argument
	}
	if over.Keyword != "" {
		base.Keyword = over.Keyword
	}
	if over.MaxDepth != 0 {
		base.MaxDepth = over.MaxDepth
	}
	return base
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
		in.Trajectory = textTrajectory(t, c.completion)
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
func textTrajectory(t *task.Task, text string) *rollout.Trajectory {
	turn := rollout.Turn{Text: text}
	for _, p := range toolcall.Parse(text) {
		cr := rollout.CallResult{Call: p.Call}
		if p.Err != nil {
			cr.ParseError = p.Err.Error()
		}
		turn.Calls = append(turn.Calls, cr)
	}
	return &rollout.Trajectory{Task: t, Turns: []rollout.Turn{turn}, Answer: toolcall.StripCalls(text)}
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
