package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mcprl/mcprl/chat"
)

// Limits on what a report embeds, to keep the page light on long runs.
const (
	// MaxSampledSteps is how many logging steps' sampled trajectories the browser holds (spread evenly,
	// first and last included); the per-tool curves use every step.
	MaxSampledSteps = 40
	// MaxText is the longest text (a turn, a tool result) kept whole; longer ones are cut with a note.
	MaxText = 4000
	// MaxEvalTasks is how many tasks of an evaluation the browser holds (in file order).
	MaxEvalTasks = 200
)

// Run is what the report shows of one run folder.
type Run struct {
	Name string `json:"name"`
	Dir  string `json:"dir"`
	// Steps are the logging steps, ascending; Series holds each metric's values at them (nil where
	// the step did not log it or logged null).
	Steps  []int                 `json:"steps"`
	Series map[string][]*float64 `json:"series"`
	// Samples are the trajectories sampled at logging steps, grouped by prompt.
	Samples []SampledStep `json:"samples"`
	// Evals are the evaluations found in the folder.
	Evals []Eval `json:"evals"`
	// Warnings name the lines that could not be read (file:line: problem); the rest was loaded.
	Warnings []string `json:"warnings"`
}

// SampledStep is one logging step's sampled trajectories.
type SampledStep struct {
	Step   int     `json:"step"`
	Groups []Group `json:"groups"`
}

// Group is the trajectories of one prompt (a GRPO group, or an evaluation task's samples).
type Group struct {
	TaskID       string       `json:"task_id"`
	Category     string       `json:"category,omitempty"`
	Prompt       string       `json:"prompt,omitempty"`
	Trajectories []Trajectory `json:"trajectories"`
}

// Trajectory is a sampled trajectory as the browser shows it.
type Trajectory struct {
	Index     int               `json:"index"`
	Turns     []chat.TurnRecord `json:"turns"`
	Truncated bool              `json:"truncated,omitempty"`
	Error     string            `json:"error,omitempty"`
	// Reward is the total; Rewards each function's score; Parts each composite function's weighted
	// parts; Advantage (training) and Success (evaluation) when known.
	Reward    *float64            `json:"reward"`
	Rewards   map[string]*float64 `json:"rewards,omitempty"`
	Parts     map[string][]Part   `json:"parts,omitempty"`
	Advantage *float64            `json:"advantage,omitempty"`
	Success   *bool               `json:"success,omitempty"`
	// BranchOf, BranchTurn and BranchTrigger mark a recovery branch: the Index of its root, how many of its
	// turns are the root's, and the setback it was sampled from (Completion's).
	BranchOf      *int   `json:"branch_of,omitempty"`
	BranchTurn    int    `json:"branch_turn,omitempty"`
	BranchTrigger string `json:"branch_trigger,omitempty"`
}

// rootIndex is the index a trajectory sorts under: its root's for a branch.
func (t Trajectory) rootIndex() int {
	if t.BranchOf != nil {
		return *t.BranchOf
	}
	return t.Index
}

// Part is one weighted part of a composite reward.
type Part struct {
	Name   string   `json:"name"`
	Weight float64  `json:"weight"`
	Score  *float64 `json:"score"`
}

// Eval is one evaluation: its summary (report.json as `mcprl eval` writes it) and its trajectories by
// task.
type Eval struct {
	Name    string          `json:"name"`
	Summary json.RawMessage `json:"summary"`
	Tasks   []Group         `json:"tasks"`
}

// Load reads a run folder. It fails when the folder cannot be read or holds nothing to report; lines
// that cannot be read are skipped and named in Run.Warnings.
func Load(dir string) (*Run, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("report: %s is not a folder", dir)
	}
	r := &Run{Name: filepath.Base(filepath.Clean(dir)), Dir: dir, Series: map[string][]*float64{}}
	byStep := map[int]map[string]*float64{}
	if err := r.loadMetrics(filepath.Join(dir, "metrics.jsonl"), byStep); err != nil {
		return nil, err
	}
	var comps []Completion
	if comps, err = r.loadCompletions(filepath.Join(dir, "completions.jsonl")); err != nil {
		return nil, err
	}
	addToolSeries(comps, byStep)
	r.setSeries(byStep)
	r.Samples = sampledSteps(comps)

	evalDirs := []string{dir}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			evalDirs = append(evalDirs, filepath.Join(dir, e.Name()))
		}
	}
	for _, d := range evalDirs {
		ev, err := r.loadEval(d)
		if err != nil {
			return nil, err
		}
		if ev != nil {
			r.Evals = append(r.Evals, *ev)
		}
	}
	if len(r.Steps) == 0 && len(r.Samples) == 0 && len(r.Evals) == 0 {
		return nil, fmt.Errorf("report: %s holds no metrics.jsonl, completions.jsonl or evaluation (report.json)", dir)
	}
	return r, nil
}

// eachLine calls fn with every non-blank line of a JSONL file and its number; a missing file has none.
// A line fn rejects becomes a warning.
func (r *Run) eachLine(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(line); ferr != nil {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s:%d: %v", path, n, ferr))
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("report: %s:%d: %w", path, n, err)
		}
	}
}

func (r *Run) loadMetrics(path string, byStep map[int]map[string]*float64) error {
	return r.eachLine(path, func(line []byte) error {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			return err
		}
		s, ok := rec["step"].(float64)
		if !ok || s != math.Trunc(s) {
			return errors.New(`no integer "step"`)
		}
		vals := map[string]*float64{}
		for k, v := range rec {
			if k == "step" {
				continue
			}
			switch v := v.(type) {
			case float64:
				vals[k] = &v
			case nil:
				vals[k] = nil
			default:
				return fmt.Errorf("%q is %T, want a number or null", k, v)
			}
		}
		// A step logged twice (a resumed run's file before it was cut) keeps its last values.
		byStep[int(s)] = vals
		return nil
	})
}

func (r *Run) loadCompletions(path string) ([]Completion, error) {
	var out []Completion
	err := r.eachLine(path, func(line []byte) error {
		var c Completion
		if err := json.Unmarshal(line, &c); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// setSeries aligns the per-step values on the sorted steps.
func (r *Run) setSeries(byStep map[int]map[string]*float64) {
	for s := range byStep {
		r.Steps = append(r.Steps, s)
	}
	sort.Ints(r.Steps)
	for i, s := range r.Steps {
		for k, v := range byStep[s] {
			col := r.Series[k]
			if col == nil {
				col = make([]*float64, len(r.Steps))
				r.Series[k] = col
			}
			col[i] = v
		}
	}
}

// addToolSeries adds per-tool curves computed from the sampled trajectories of each step:
// per_tool/NAME/call_frequency (calls per trajectory), per_tool/NAME/success_rate and
// per_tool/NAME/parse_error_rate (shares of the tool's calls).
func addToolSeries(comps []Completion, byStep map[int]map[string]*float64) {
	type counts struct{ calls, ok, malformed int }
	perStep := map[int]map[string]*counts{}
	trajs := map[int]int{}
	names := map[string]bool{}
	for _, c := range comps {
		trajs[c.Step]++
		tools := perStep[c.Step]
		if tools == nil {
			tools = map[string]*counts{}
			perStep[c.Step] = tools
		}
		for _, t := range c.Turns {
			for _, call := range t.Calls {
				if call.Name == "" {
					continue
				}
				names[call.Name] = true
				n := tools[call.Name]
				if n == nil {
					n = &counts{}
					tools[call.Name] = n
				}
				n.calls++
				switch {
				case call.ParseError != "":
					n.malformed++
				case !call.IsError:
					n.ok++
				}
			}
		}
	}
	for step, tools := range perStep {
		vals := byStep[step]
		if vals == nil {
			vals = map[string]*float64{}
			byStep[step] = vals
		}
		for name := range names {
			n := tools[name]
			if n == nil {
				n = &counts{}
			}
			prefix := "per_tool/" + name + "/"
			vals[prefix+"call_frequency"] = ptr(float64(n.calls) / float64(trajs[step]))
			if n.calls > 0 {
				vals[prefix+"success_rate"] = ptr(float64(n.ok) / float64(n.calls))
				vals[prefix+"parse_error_rate"] = ptr(float64(n.malformed) / float64(n.calls))
			}
		}
	}
}

func ptr(v float64) *float64 { return &v }

// sampledSteps groups completions by step and group, keeping at most MaxSampledSteps steps spread
// evenly over the run.
func sampledSteps(comps []Completion) []SampledStep {
	byStep := map[int]map[int]*Group{}
	for _, c := range comps {
		groups := byStep[c.Step]
		if groups == nil {
			groups = map[int]*Group{}
			byStep[c.Step] = groups
		}
		g := groups[c.Group]
		if g == nil {
			g = &Group{TaskID: c.TaskID, Category: c.Category, Prompt: clip(c.Prompt)}
			groups[c.Group] = g
		}
		g.Trajectories = append(g.Trajectories, Trajectory{
			Index: c.Index, Turns: clipTurns(c.Turns), Truncated: c.Truncated, Error: clip(c.Error),
			Reward: c.Reward, Rewards: c.Rewards, Advantage: c.Advantage,
			BranchOf: c.BranchOf, BranchTurn: c.BranchTurn, BranchTrigger: c.BranchTrigger,
		})
	}
	var steps []int
	for s := range byStep {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	steps = spread(steps, MaxSampledSteps)
	out := make([]SampledStep, 0, len(steps))
	for _, s := range steps {
		var ids []int
		for id := range byStep[s] {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		st := SampledStep{Step: s}
		for _, id := range ids {
			g := byStep[s][id]
			// A recovery branch comes right after its root (and its siblings).
			sort.SliceStable(g.Trajectories, func(i, j int) bool {
				a, b := g.Trajectories[i], g.Trajectories[j]
				if a.rootIndex() != b.rootIndex() {
					return a.rootIndex() < b.rootIndex()
				}
				if (a.BranchOf == nil) != (b.BranchOf == nil) {
					return a.BranchOf == nil
				}
				return a.Index < b.Index
			})
			st.Groups = append(st.Groups, *g)
		}
		out = append(out, st)
	}
	return out
}

// spread keeps at most n of xs, evenly spaced, the first and last included.
func spread(xs []int, n int) []int {
	if len(xs) <= n {
		return xs
	}
	out := make([]int, 0, n)
	for i := range n {
		out = append(out, xs[i*(len(xs)-1)/(n-1)])
	}
	return out
}

// evalRecord is a line of `mcprl eval`'s trajectories.jsonl, as far as the report reads it.
type evalRecord struct {
	TaskID    string                 `json:"task_id"`
	Category  string                 `json:"category"`
	Sample    int                    `json:"sample"`
	Success   bool                   `json:"success"`
	Turns     []chat.TurnRecord      `json:"turns"`
	Truncated bool                   `json:"truncated"`
	Error     string                 `json:"error"`
	Reward    map[string]scoreRecord `json:"reward"`
}

// scoreRecord is a reward function's score as `mcprl eval` saves it.
type scoreRecord struct {
	Score *float64 `json:"score"`
	Parts []struct {
		Name   string  `json:"name"`
		Weight float64 `json:"weight"`
		Score  struct {
			Score *float64 `json:"score"`
		} `json:"score"`
	} `json:"parts"`
}

// loadEval reads the evaluation in dir, nil when there is none (no report.json).
func (r *Run) loadEval(dir string) (*Eval, error) {
	summaryPath := filepath.Join(dir, "report.json")
	b, err := os.ReadFile(summaryPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var summary struct {
		SuccessRate *float64 `json:"success_rate"`
	}
	if err := json.Unmarshal(b, &summary); err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %v", summaryPath, err))
		return nil, nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, fmt.Errorf("report: %s: %w", summaryPath, err)
	}
	ev := &Eval{Name: filepath.Base(filepath.Clean(dir)), Summary: compact.Bytes()}
	byTask := map[string]*Group{}
	var order []string
	err = r.eachLine(filepath.Join(dir, "trajectories.jsonl"), func(line []byte) error {
		var rec evalRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return err
		}
		g := byTask[rec.TaskID]
		if g == nil {
			if len(order) == MaxEvalTasks {
				return nil
			}
			g = &Group{TaskID: rec.TaskID, Category: rec.Category}
			byTask[rec.TaskID] = g
			order = append(order, rec.TaskID)
		}
		success := rec.Success
		t := Trajectory{Index: rec.Sample, Turns: clipTurns(rec.Turns), Truncated: rec.Truncated, Error: clip(rec.Error), Success: &success}
		names := make([]string, 0, len(rec.Reward))
		for name := range rec.Reward {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			s := rec.Reward[name]
			if t.Rewards == nil {
				t.Rewards, t.Parts = map[string]*float64{}, map[string][]Part{}
			}
			t.Rewards[name] = s.Score
			for _, p := range s.Parts {
				t.Parts[name] = append(t.Parts[name], Part{Name: p.Name, Weight: p.Weight, Score: p.Score.Score})
			}
		}
		g.Trajectories = append(g.Trajectories, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range order {
		ev.Tasks = append(ev.Tasks, *byTask[id])
	}
	return ev, nil
}

func clipTurns(turns []chat.TurnRecord) []chat.TurnRecord {
	out := make([]chat.TurnRecord, len(turns))
	for i, t := range turns {
		out[i] = chat.TurnRecord{Text: clip(t.Text)}
		for _, c := range t.Calls {
			c.Result, c.ParseError = clip(c.Result), clip(c.ParseError)
			if len(c.Arguments) > MaxText {
				c.Arguments, _ = json.Marshal(clip(string(c.Arguments)))
			}
			out[i].Calls = append(out[i].Calls, c)
		}
	}
	return out
}

// clip cuts s to MaxText bytes (at a rune boundary) and says how much was left out.
func clip(s string) string {
	if len(s) <= MaxText {
		return s
	}
	cut := MaxText
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" [... %d more bytes]", len(s)-cut)
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// metricSections orders the union of keys of runs into the report's sections.
func metricSections(runs []*Run) []Section {
	keys := map[string]bool{}
	for _, r := range runs {
		for k := range r.Series {
			keys[k] = true
		}
	}
	sections := []Section{
		{Title: "Reward"}, {Title: "Loss and policy"}, {Title: "Completions"}, {Title: "Tools"},
		{Title: "Tools, per tool (from sampled trajectories)"}, {Title: "Learning rate"}, {Title: "Other"},
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool {
		ri, rj := keyRank(sorted[i]), keyRank(sorted[j])
		if ri != rj {
			return ri < rj
		}
		return sorted[i] < sorted[j]
	})
	for _, k := range sorted {
		if k == "epoch" {
			continue
		}
		i := sectionOf(k)
		sections[i].Keys = append(sections[i].Keys, k)
	}
	var out []Section
	for _, s := range sections {
		if len(s.Keys) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Section is a titled group of metrics, one chart each.
type Section struct {
	Title string   `json:"title"`
	Keys  []string `json:"keys"`
}

func sectionOf(k string) int {
	switch {
	case k == "reward" || k == "reward_std" || k == "frac_reward_zero_std" || strings.HasPrefix(k, "rewards/"):
		return 0
	case k == "loss" || k == "grad_norm" || k == "kl" || k == "entropy" || strings.HasPrefix(k, "clip_ratio") ||
		k == "mean_token_accuracy":
		return 1
	case k == "completion_length" || strings.HasPrefix(k, "completions/") || k == "num_tokens":
		return 2
	case strings.HasPrefix(k, "tools/"):
		return 3
	case strings.HasPrefix(k, "per_tool/"):
		return 4
	case k == "learning_rate":
		return 5
	}
	return 6
}

// keyRank puts the headline metrics of a section first.
func keyRank(k string) int {
	for i, head := range []string{"reward", "loss", "completion_length", "tools/call_frequency", "tools/success_rate", "tools/parse_error_rate"} {
		if k == head {
			return i
		}
	}
	return 100
}
