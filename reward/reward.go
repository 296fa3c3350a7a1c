package reward

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/task"
)

// Sandbox is what live rewards read from the trajectory's sandbox; a
// *sandbox.Sandbox is one.
type Sandbox interface {
	Tools() []*mcp.Tool
	DB() *sqldb.DB
}

// Input is what a Func scores.
type Input struct {
	Task       *task.Task
	Trajectory *chat.Trajectory
	// Sandbox is the trajectory's own sandbox, after the trajectory ran:
	// live checks (SQL oracles) read its state. Nil when no Func needs it.
	Sandbox Sandbox
	// Catalog names the tools the agent was offered. Nil means the
	// sandbox's tools, or task.DefaultTools without a sandbox.
	Catalog []string
}

// catalog returns the tool names the agent was offered.
func (in *Input) catalog() []string {
	if in.Catalog != nil {
		return in.Catalog
	}
	if in.Sandbox != nil {
		return sandbox.ToolNames(in.Sandbox.Tools())
	}
	return task.DefaultTools
}

// Func is one reward function.
type Func interface {
	Name() string
	Score(ctx context.Context, in *Input) (Score, error)
}

// Live is implemented by Funcs that read tool results or the sandbox's
// state: a caller that only has completion text must execute the
// completion's calls in a sandbox before scoring with them.
type Live interface {
	NeedsSandbox() bool
}

// NeedsSandbox reports whether f (or any part of it) needs live tool results.
func NeedsSandbox(f Func) bool {
	if l, ok := f.(Live); ok {
		return l.NeedsSandbox()
	}
	return false
}

// Score is a reward and the account of how it was reached.
type Score struct {
	Value float64 `json:"score"`
	// Reason says in one line why the value is what it is.
	Reason string `json:"reason,omitempty"`
	// Checks itemise what was tested (one per assertion, guard, ...).
	Checks []Check `json:"checks,omitempty"`
	// Parts are the weighted components of a composite, in order.
	Parts []Part `json:"parts,omitempty"`
}

// Check is one itemised test and its outcome.
type Check struct {
	Name string `json:"name"`
	Held bool   `json:"held"`
	Why  string `json:"why,omitempty"`
	// Credit is the check's share of the score (1 when it held, partial
	// credit otherwise).
	Credit float64 `json:"credit"`
}

// Part is one named, weighted component of a composite score.
type Part struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
	Score  Score   `json:"score"`
}

// Breakdown renders a score's parts as a JSON object keyed by part name, in
// order: {"name": {"weight": w, "score": s, "reason": ..., "checks": [...]}}.
// A score without parts is rendered as {name: score}.
func Breakdown(name string, s Score) json.RawMessage {
	var b strings.Builder
	b.WriteByte('{')
	write := func(i int, name string, weight float64, s Score) {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteString(`:{"weight":`)
		b.WriteString(FormatFloat(weight))
		b.WriteString(`,"score":`)
		b.WriteString(FormatFloat(s.Value))
		if s.Reason != "" {
			r, _ := json.Marshal(s.Reason)
			b.WriteString(`,"reason":`)
			b.Write(r)
		}
		if len(s.Checks) > 0 {
			c, _ := json.Marshal(s.Checks)
			b.WriteString(`,"checks":`)
			b.Write(c)
		}
		if len(s.Parts) > 0 {
			b.WriteString(`,"parts":`)
			b.Write(Breakdown("", Score{Parts: s.Parts}))
		}
		b.WriteByte('}')
	}
	if len(s.Parts) == 0 {
		write(0, name, 1, s)
	} else {
		for i, p := range s.Parts {
			write(i, p.Name, p.Weight, p.Score)
		}
	}
	b.WriteByte('}')
	return json.RawMessage(b.String())
}

// FormatFloat writes a reward as JSON: the shortest decimal that reads back
// as the same float64 (as Python's repr does); NaN and infinities, which
// JSON lacks, as null.
func FormatFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Term is one Func in a weighted composition.
type Term struct {
	Func   Func
	Weight float64
	// Veto: when this term scores non-zero, the composite's value is
	// Weight*score alone (the user's function returns -0.5 for a
	// hallucinated tool whatever else the call got right). Funcs that are
	// vetoes by nature (hallucination) set it through Vetoer.
	Veto bool
}

// Vetoer is implemented by Funcs whose non-zero score replaces the total.
type Vetoer interface{ IsVeto() bool }

// Weighted is a reward composed of named terms: their WeightedSum, with
// vetoes, each part named in the breakdown.
type Weighted struct {
	name  string
	terms []Term
}

// NewWeighted composes terms under name. A term whose Func is a Vetoer
// that says so is a veto.
func NewWeighted(name string, terms ...Term) *Weighted {
	for i := range terms {
		if v, ok := terms[i].Func.(Vetoer); ok && v.IsVeto() {
			terms[i].Veto = true
		}
	}
	return &Weighted{name: name, terms: terms}
}

// Name implements Func.
func (w *Weighted) Name() string { return w.name }

// Terms returns the composition's terms.
func (w *Weighted) Terms() []Term { return w.terms }

// NeedsSandbox implements Live: true when any term needs live results.
func (w *Weighted) NeedsSandbox() bool {
	for _, t := range w.terms {
		if NeedsSandbox(t.Func) {
			return true
		}
	}
	return false
}

// Score implements Func: WeightedSum of the terms' scores with their
// vetoes; every term is scored, and named in the breakdown.
func (w *Weighted) Score(ctx context.Context, in *Input) (Score, error) {
	var out Score
	scores := make([]float64, len(w.terms))
	weights := make([]float64, len(w.terms))
	vetoes := make([]bool, len(w.terms))
	for i, t := range w.terms {
		s, err := t.Func.Score(ctx, in)
		if err != nil {
			return Score{}, fmt.Errorf("reward %s: %w", t.Func.Name(), err)
		}
		out.Parts = append(out.Parts, Part{Name: t.Func.Name(), Weight: t.Weight, Score: s})
		scores[i], weights[i], vetoes[i] = s.Value, t.Weight, t.Veto
	}
	var by int
	out.Value, by = WeightedSum(scores, weights, vetoes)
	if by >= 0 {
		out.Reason = "vetoed by " + w.terms[by].Func.Name()
	}
	return out, nil
}

// Maker builds a Func with its default settings.
type Maker func() Func

// Registry maps reward names to their makers.
type Registry struct {
	makers  map[string]Maker
	docs    map[string]string
	aliases map[string]string // other accepted name -> registered name
}

// NewRegistry returns a registry holding every built-in reward.
func NewRegistry() *Registry {
	r := &Registry{makers: map[string]Maker{}, docs: map[string]string{}, aliases: map[string]string{}}
	r.Register(MCPRewardName, "the user's compute_mcp_reward, exactly (Python semantics)", func() Func { return NewMCPReward(DefaultMCPRewardConfig()) })
	r.Alias("seed", MCPRewardName) // its name before it was named after the user's function
	r.Register("assertions", "fraction of ground_truth_assertions that hold live in the trajectory's sandbox", func() Func { return NewAssertions() })
	r.Register("format", "fraction of <tool_call> blocks that are well-formed (0 without calls), less repeats and spam", func() Func { return Format{} })
	r.Register("tool_selection", "the tools the assertions need were called and every call names a catalog tool", func() Func { return ToolSelection{} })
	r.Register("execution", "assertions holding live, given successful tool calls and no farming", func() Func { return NewExecution() })
	r.Register("hallucination", "-1 when a call names a tool outside the catalog (a veto)", func() Func { return Hallucination{} })
	r.Register("verifiable", "format 0.3 + tool_selection 0.3 + execution 0.4, -0.5 for a hallucinated tool", func() Func { return Verifiable() })
	return r
}

// Register adds (or replaces) a named reward.
func (r *Registry) Register(name, doc string, mk Maker) {
	r.makers[name] = mk
	r.docs[name] = doc
}

// Alias makes New accept alias for the registered reward name: the Func
// it builds keeps name (its metrics and breakdowns say name).
func (r *Registry) Alias(alias, name string) { r.aliases[alias] = name }

// Resolve returns the registered name that name stands for: the reward an
// alias names, or name itself.
func (r *Registry) Resolve(name string) string {
	if n, ok := r.aliases[name]; ok {
		return n
	}
	return name
}

// Names lists the registered rewards, sorted (aliases are not listed).
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.makers))
	for n := range r.makers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Doc is the one-line description of a registered reward.
func (r *Registry) Doc(name string) string { return r.docs[name] }

// New builds the reward called name (or an alias of it).
func (r *Registry) New(name string) (Func, error) {
	name = r.Resolve(name)
	mk, ok := r.makers[name]
	if !ok {
		return nil, fmt.Errorf("unknown reward %q (known: %s)", name, strings.Join(r.Names(), ", "))
	}
	return mk(), nil
}

// Parse builds a Func from a comma-separated spec of NAME or NAME:WEIGHT
// terms ("compute_mcp_reward", "format:0.3,tool_selection:0.3,execution:0.4"). A single
// term without a weight is the Func itself; otherwise a Weighted named by
// the spec. Weights default to 1.
func (r *Registry) Parse(spec string) (Func, error) {
	items := strings.Split(spec, ",")
	var terms []Term
	seen := map[string]string{} // resolved name -> the name it was given as
	for _, it := range items {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		name, weight := it, 1.0
		if i := strings.IndexByte(it, ':'); i >= 0 {
			name = it[:i]
			w, err := strconv.ParseFloat(it[i+1:], 64)
			if err != nil || math.IsNaN(w) || math.IsInf(w, 0) {
				return nil, fmt.Errorf("reward %q: weight %q is not a number", name, it[i+1:])
			}
			weight = w
		}
		f, err := r.New(name)
		if err != nil {
			return nil, err
		}
		// The same reward twice, also through an alias (seed and
		// compute_mcp_reward are one), would be counted twice.
		resolved := r.Resolve(name)
		if first, dup := seen[resolved]; dup {
			if first == name {
				return nil, fmt.Errorf("reward %q listed twice in %q", name, spec)
			}
			return nil, fmt.Errorf("reward %q listed twice in %q: %q is the same reward (%s)", name, spec, first, resolved)
		}
		seen[resolved] = name
		terms = append(terms, Term{Func: f, Weight: weight})
	}
	if len(terms) == 0 {
		return nil, fmt.Errorf("no reward named in %q", spec)
	}
	if len(terms) == 1 && !strings.Contains(spec, ":") {
		return terms[0].Func, nil
	}
	return NewWeighted(spec, terms...), nil
}
