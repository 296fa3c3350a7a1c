package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/reward"
)

// Rate is a metric that may be undefined (NaN: nothing to measure it on,
// such as tool accuracy without any call); JSON writes it as null.
type Rate float64

// Defined reports whether r was measured.
func (r Rate) Defined() bool { return !math.IsNaN(float64(r)) }

// MarshalJSON implements json.Marshaler.
func (r Rate) MarshalJSON() ([]byte, error) { return []byte(reward.FormatFloat(float64(r))), nil }

// UnmarshalJSON implements json.Unmarshaler (null reads as NaN).
func (r *Rate) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = Rate(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*r = Rate(f)
	return nil
}

func ratio(num, den int) Rate {
	if den == 0 {
		return Rate(math.NaN())
	}
	return Rate(float64(num) / float64(den))
}

// Metrics summarise a set of trajectories.
//
//   - success_rate: share of trajectories in which every assertion holds
//     (the assertions reward is 1).
//   - pass_at_k: mean over tasks of the unbiased pass@k estimator from the
//     task's n samples and c successes (PassAtK).
//   - tool_accuracy: share of tool calls that are well-formed, name a tool
//     of the catalog and did not error (the sandbox refuses invalid
//     arguments with an error, so this covers valid arguments).
//   - hallucination_rate: share of tool calls naming a tool outside the
//     catalog.
//   - format_error_rate: share of tool calls that could not be parsed
//     (malformed <tool_call> blocks).
//   - mean_turns: mean number of assistant turns per trajectory.
//   - self_correction_rate: among trajectories with a failed or empty tool
//     call (an error, a malformed call, or a result with no rows and no rows
//     affected), the share that still succeeded.
//
// The call rates pool every call of every scored trajectory. A trajectory
// ended by an infrastructure failure (a policy server's or a tool server's)
// or that could not be scored says nothing about the policy: it is counted
// in n_errors and left out of every rate; pass@k averages over the tasks
// with at least k scored trajectories. A rate with nothing to measure it on
// is null.
type Metrics struct {
	SuccessRate        Rate `json:"success_rate"`
	PassAtK            Rate `json:"pass_at_k"`
	ToolAccuracy       Rate `json:"tool_accuracy"`
	HallucinationRate  Rate `json:"hallucination_rate"`
	FormatErrorRate    Rate `json:"format_error_rate"`
	MeanTurns          Rate `json:"mean_turns"`
	SelfCorrectionRate Rate `json:"self_correction_rate"`
	NTasks             int  `json:"n_tasks"`
	NTrajectories      int  `json:"n_trajectories"`
	// NScored counts the trajectories the rates are over: NTrajectories
	// less NErrors.
	NScored    int `json:"n_scored"`
	NSucceeded int `json:"n_succeeded"`
	NCalls     int `json:"n_calls"`
	// NSetback counts trajectories with a failed or empty tool call;
	// NSelfCorrected those of them that succeeded and, after the setback,
	// ran another call without failing (CallStats.Recovered): a trajectory
	// that had its answer before it went wrong did not correct itself.
	NSetback       int `json:"n_setback"`
	NSelfCorrected int `json:"n_self_corrected"`
	// NErrors counts trajectories ended by an infrastructure failure (a
	// policy server, a sandbox or a tool server failed) or that could not
	// be scored; they are left out of the rates.
	NErrors int `json:"n_errors"`
}

// Report is an evaluation's summary: Metrics over every trajectory, and per
// task category ("uncategorized" for tasks without one).
type Report struct {
	Metrics
	K          int                 `json:"k"`
	Samples    int                 `json:"samples"`
	Categories map[string]*Metrics `json:"categories"`
}

// CallStats classifies one trajectory's tool calls.
type CallStats struct {
	Calls, Accurate, Hallucinated, Malformed int
	// Setback is true when a call failed (IsError, malformed) or came back
	// empty; Recovered when, after the first such call, another call ran
	// without failing (a look that comes back empty, such as a LIMIT 0 for
	// the columns, counts). A call that never ran (chat.CallResult.NotRun)
	// is neither.
	Setback, Recovered bool
}

// StatsOf classifies the calls of tr against the catalog.
func StatsOf(tr *chat.Trajectory, catalog []string) CallStats {
	var s CallStats
	if tr == nil {
		return s
	}
	for _, turn := range tr.Turns {
		for _, c := range turn.Calls {
			s.Calls++
			known := slices.Contains(catalog, c.Call.Name)
			switch {
			case c.ParseError != "":
				s.Malformed++
				if c.Call.Name != "" && !known {
					s.Hallucinated++
				}
			case !known:
				s.Hallucinated++
			case !c.IsError:
				s.Accurate++
			}
			switch {
			case c.NotRun:
			case c.ParseError != "" || c.IsError:
				s.Setback = true
			case s.Setback:
				s.Recovered = true
			case Empty(c):
				s.Setback = true
			}
		}
	}
	return s
}

// Empty reports whether a call succeeded with nothing: a query result with
// no rows and no rows affected, or a result without text.
func Empty(c chat.CallResult) bool {
	if c.ParseError != "" || c.IsError {
		return false
	}
	if c.Structured != nil {
		b, err := json.Marshal(c.Structured)
		if err == nil {
			var r struct {
				Columns      *[]string          `json:"columns"`
				Rows         *[]json.RawMessage `json:"rows"`
				RowsAffected *int64             `json:"rows_affected"`
			}
			if json.Unmarshal(b, &r) == nil && (r.Columns != nil || r.Rows != nil || r.RowsAffected != nil) {
				rows := r.Rows != nil && len(*r.Rows) > 0
				affected := r.RowsAffected != nil && *r.RowsAffected != 0
				return !rows && !affected
			}
		}
	}
	return strings.TrimSpace(c.Text) == ""
}

type tally struct {
	tasks                                    map[string][]bool
	order                                    []string // task ids in first-seen order (a fixed summation order)
	trajs, ok, turns, errors                 int
	calls, accurate, hallucinated, malformed int
	setback, corrected                       int
}

func (t *tally) add(s *Sample) {
	if t.tasks == nil {
		t.tasks = map[string][]bool{}
	}
	if _, seen := t.tasks[s.Task.ID]; !seen {
		t.order = append(t.order, s.Task.ID)
		t.tasks[s.Task.ID] = nil
	}
	t.trajs++
	if s.Errored() {
		t.errors++
		return
	}
	ok := s.Success()
	t.tasks[s.Task.ID] = append(t.tasks[s.Task.ID], ok)
	if ok {
		t.ok++
	}
	if s.Trajectory != nil {
		t.turns += len(s.Trajectory.Turns)
	}
	st := StatsOf(s.Trajectory, s.Catalog)
	t.calls += st.Calls
	t.accurate += st.Accurate
	t.hallucinated += st.Hallucinated
	t.malformed += st.Malformed
	if st.Setback {
		t.setback++
		if ok && st.Recovered {
			t.corrected++
		}
	}
}

func (t *tally) metrics(k int) (*Metrics, error) {
	scored := t.trajs - t.errors
	m := &Metrics{
		SuccessRate:        ratio(t.ok, scored),
		ToolAccuracy:       ratio(t.accurate, t.calls),
		HallucinationRate:  ratio(t.hallucinated, t.calls),
		FormatErrorRate:    ratio(t.malformed, t.calls),
		MeanTurns:          ratio(t.turns, scored),
		SelfCorrectionRate: ratio(t.corrected, t.setback),
		NTasks:             len(t.tasks),
		NTrajectories:      t.trajs,
		NScored:            scored,
		NSucceeded:         t.ok,
		NCalls:             t.calls,
		NSetback:           t.setback,
		NSelfCorrected:     t.corrected,
		NErrors:            t.errors,
	}
	sum, measured := 0.0, 0
	for _, id := range t.order {
		runs := t.tasks[id]
		if len(runs) < k {
			continue // fewer than k scored trajectories: pass@k is not measured on it
		}
		c := 0
		for _, ok := range runs {
			if ok {
				c++
			}
		}
		p, err := PassAtK(len(runs), c, k)
		if err != nil {
			return nil, fmt.Errorf("task %q: %w", id, err)
		}
		sum += p
		measured++
	}
	m.PassAtK = ratio(0, 0)
	if measured > 0 {
		m.PassAtK = Rate(sum / float64(measured))
	}
	return m, nil
}

// Uncategorized is the category of tasks that name none.
const Uncategorized = "uncategorized"

// Summarize computes the report of samples (every task with at least k
// samples), overall and per category.
func Summarize(samples []*Sample, k int) (*Report, error) {
	if k < 1 {
		return nil, fmt.Errorf("eval: k=%d must be at least 1", k)
	}
	var all tally
	cats := map[string]*tally{}
	per := map[string]int{}
	for _, s := range samples {
		all.add(s)
		c := s.Task.Category
		if c == "" {
			c = Uncategorized
		}
		if cats[c] == nil {
			cats[c] = &tally{}
		}
		cats[c].add(s)
		per[s.Task.ID]++
	}
	m, err := all.metrics(k)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	n := 0
	for id, c := range per {
		if c < k {
			return nil, fmt.Errorf("eval: task %q: k=%d exceeds its %d samples", id, k, c)
		}
		if n == 0 || c < n {
			n = c
		}
	}
	r := &Report{Metrics: *m, K: k, Samples: n, Categories: map[string]*Metrics{}}
	for name, t := range cats {
		if r.Categories[name], err = t.metrics(k); err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
	}
	return r, nil
}

// Write writes the report as one JSON object and a newline (asJSON), else
// as WriteTable's table.
func (r *Report) Write(w io.Writer, asJSON bool) error {
	if !asJSON {
		return r.WriteTable(w)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteTable writes the report as a readable table: one row overall, one
// per category (sorted); the first column left-aligned, the numbers right.
// The errors column counts the trajectories left out of the rates.
func (r *Report) WriteTable(w io.Writer) error {
	rows := [][]string{{"category", "tasks", "traj", "errors", "success", fmt.Sprintf("pass@%d", r.K), "tool acc", "halluc", "format err", "turns", "self-corr"}}
	row := func(name string, m *Metrics) {
		rows = append(rows, []string{name, fmt.Sprint(m.NTasks), fmt.Sprint(m.NTrajectories), fmt.Sprint(m.NErrors),
			pct(m.SuccessRate), pct(m.PassAtK), pct(m.ToolAccuracy), pct(m.HallucinationRate),
			pct(m.FormatErrorRate), num(m.MeanTurns), fmt.Sprintf("%s (%d/%d)", pct(m.SelfCorrectionRate), m.NSelfCorrected, m.NSetback)})
	}
	row("overall", &r.Metrics)
	names := make([]string, 0, len(r.Categories))
	for name := range r.Categories {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		row(name, r.Categories[name])
	}
	width := make([]int, len(rows[0]))
	for _, cells := range rows {
		for i, c := range cells {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, cells := range rows {
		for i, c := range cells {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", width[i], c)
			} else {
				fmt.Fprintf(&b, "  %*s", width[i], c)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(r Rate) string {
	if !r.Defined() {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(r))
}

func num(r Rate) string {
	if !r.Defined() {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(r))
}
