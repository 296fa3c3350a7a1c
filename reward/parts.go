package reward

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcprl/mcprl/chat"
)

// DefaultCallBudget is how many tool calls a trajectory may make before
// the format, tool_selection and execution parts scale down (spam guard).
const DefaultCallBudget = 8

// usage summarises a trajectory's tool calls for the guards.
type usage struct {
	total      int // every <tool_call> block, malformed ones included
	wellFormed int
	unique     int // well-formed calls, identical name+arguments counted once
	succeeded  int // well-formed calls whose tool did not report an error
	known      map[string]bool
	unknown    []string
}

func callKey(c chat.CallResult) string {
	var args bytes.Buffer
	if err := json.Compact(&args, c.Call.Arguments); err != nil {
		args.Write(c.Call.Arguments)
	}
	// Canonical key order: decode and re-encode (maps sort their keys).
	var v any
	if json.Unmarshal(args.Bytes(), &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			return c.Call.Name + "\x00" + string(b)
		}
	}
	return c.Call.Name + "\x00" + args.String()
}

func usageOf(in *Input) usage {
	u := usage{known: map[string]bool{}}
	if in.Trajectory == nil {
		return u
	}
	catalog := in.catalog()
	inCatalog := func(name string) bool {
		for _, c := range catalog {
			if c == name {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	for _, turn := range in.Trajectory.Turns {
		for _, c := range turn.Calls {
			u.total++
			if c.Call.Name != "" && !inCatalog(c.Call.Name) {
				u.unknown = append(u.unknown, c.Call.Name)
				continue
			}
			if c.ParseError != "" {
				continue
			}
			u.wellFormed++
			u.known[c.Call.Name] = true
			k := callKey(c)
			if !seen[k] {
				seen[k] = true
				u.unique++
			}
			if !c.IsError {
				u.succeeded++
			}
		}
	}
	return u
}

// guard is the factor that keeps repeats and spam from paying: the share
// of calls that are distinct and well-formed, times budget/total past the
// call budget.
func (u usage) guard(budget int) (float64, string) {
	if u.total == 0 {
		return 0, "no tool calls"
	}
	f := float64(u.unique) / float64(u.total)
	why := ""
	if u.unique < u.total {
		why = fmt.Sprintf("%d of %d calls distinct and well-formed", u.unique, u.total)
	}
	if budget > 0 && u.total > budget {
		f *= float64(budget) / float64(u.total)
		why += fmt.Sprintf("; %d calls over the budget of %d", u.total, budget)
	}
	return f, why
}

// Format scores the tool-call syntax: the share of <tool_call> blocks that
// are distinct well-formed calls (0 without any call), scaled down past
// the call budget. Repeating one good call does not raise it.
type Format struct{ Budget int }

// Name implements Func.
func (Format) Name() string { return "format" }

// Score implements Func.
func (f Format) Score(ctx context.Context, in *Input) (Score, error) {
	u := usageOf(in)
	g, why := u.guard(budgetOr(f.Budget))
	if u.total == 0 {
		return Score{Value: 0, Reason: "no tool calls"}, nil
	}
	if why == "" {
		why = fmt.Sprintf("%d well-formed calls", u.wellFormed)
	}
	return Score{Value: g, Reason: why}, nil
}

func budgetOr(b int) int {
	if b == 0 {
		return DefaultCallBudget
	}
	return b
}

// ToolSelection scores the choice of tools: the share of the tools the
// task's assertions need (query_database for a SQL oracle, run_linter for
// exit_code, X for called("X")) that were called successfully, or 1 when
// the assertions name none and there was a call; 0 when any call names a
// tool outside the catalog; scaled by the repeat/spam guard.
type ToolSelection struct{ Budget int }

// Name implements Func.
func (ToolSelection) Name() string { return "tool_selection" }

// Score implements Func.
func (t ToolSelection) Score(ctx context.Context, in *Input) (Score, error) {
	u := usageOf(in)
	if u.total == 0 {
		return Score{Value: 0, Reason: "no tool calls"}, nil
	}
	if len(u.unknown) > 0 {
		return Score{Value: 0, Reason: fmt.Sprintf("called unknown tools %q", u.unknown)}, nil
	}
	g, why := u.guard(budgetOr(t.Budget))
	var needed []string
	if in.Task != nil {
		needed = neededTools(append(slices.Clone(in.Task.GroundTruthAssertions), in.Task.StateAssertions...))
	}
	var checks []Check
	frac := 1.0
	if len(needed) > 0 {
		ok := 0
		for _, n := range needed {
			held := u.known[n]
			c := Check{Name: "called " + n, Held: held}
			if held {
				ok++
				c.Credit = 1
			} else {
				c.Why = "the assertions need " + n + " and it was not called"
			}
			checks = append(checks, c)
		}
		frac = float64(ok) / float64(len(needed))
	} else if u.wellFormed == 0 {
		frac = 0
	}
	return Score{Value: frac * g, Reason: why, Checks: checks}, nil
}

// Hallucination is -1 when any call names a tool outside the catalog, 0
// otherwise. It is a veto: in a Weighted its non-zero score replaces the
// total, as the user's function returns -0.5 whatever else was right.
type Hallucination struct{}

// Name implements Func.
func (Hallucination) Name() string { return "hallucination" }

// IsVeto implements Vetoer.
func (Hallucination) IsVeto() bool { return true }

// Score implements Func.
func (Hallucination) Score(ctx context.Context, in *Input) (Score, error) {
	u := usageOf(in)
	if len(u.unknown) > 0 {
		return Score{Value: -1, Reason: fmt.Sprintf("called tools not in the catalog: %q", u.unknown)}, nil
	}
	return Score{Value: 0}, nil
}

// Execution is the user's "correct execution outcome" part, verified live:
// the share of ground_truth_assertions that hold in the trajectory's
// sandbox after it ran, 0 unless at least one tool call succeeded, scaled
// by the repeat/spam guard (so farming calls cannot raise it).
type Execution struct {
	Assertions *Assertions
	Budget     int
}

// NewExecution returns the execution part over a fresh assertion checker.
func NewExecution() *Execution { return &Execution{Assertions: NewAssertions()} }

// Name implements Func.
func (*Execution) Name() string { return "execution" }

// NeedsSandbox implements Live.
func (*Execution) NeedsSandbox() bool { return true }

// Score implements Func.
func (e *Execution) Score(ctx context.Context, in *Input) (Score, error) {
	u := usageOf(in)
	if u.succeeded == 0 {
		return Score{Value: 0, Reason: "no tool call succeeded"}, nil
	}
	s, err := e.Assertions.Score(ctx, in)
	if err != nil {
		return Score{}, err
	}
	g, why := u.guard(budgetOr(e.Budget))
	s.Value *= g
	if why != "" {
		s.Reason = why
	}
	return s, nil
}

// Verifiable is the user's weighting with the 0.4 verified live: format
// 0.3 + tool_selection 0.3 + execution 0.4, and -0.5 (a veto) when a call
// names a tool outside the catalog.
func Verifiable() *Weighted {
	return NewWeighted("verifiable",
		Term{Func: Format{}, Weight: 0.3},
		Term{Func: ToolSelection{}, Weight: 0.3},
		Term{Func: NewExecution(), Weight: 0.4},
		Term{Func: Hallucination{}, Weight: 0.5},
	)
}
