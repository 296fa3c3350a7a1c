package reward

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

// textInput is a trajectory of one turn whose calls were parsed, not run.
func textInput(tk *task.Task, text string) *Input {
	turn := chat.Turn{Text: text}
	for _, p := range toolcall.Parse(text) {
		cr := chat.CallResult{Call: p.Call}
		if p.Err != nil {
			cr.ParseError = p.Err.Error()
		}
		turn.Calls = append(turn.Calls, cr)
	}
	return &Input{Task: tk, Trajectory: &chat.Trajectory{Turns: []chat.Turn{turn}, Answer: toolcall.StripCalls(text)}}
}

// TestSeedWherePythonRaises pins the documented scores for the inputs on
// which the user's function raises instead of returning.
func TestSeedWherePythonRaises(t *testing.T) {
	cases := []struct {
		body  string
		value float64
		err   string
	}{
		{`[]`, 0.1, "AttributeError: 'list' object has no attribute 'get'"},
		{`"query_database"`, 0.1, "AttributeError: 'str' object has no attribute 'get'"},
		{`null`, 0.1, "AttributeError: 'NoneType' object has no attribute 'get'"},
		{`NaN`, 0.1, "AttributeError: 'float' object has no attribute 'get'"},
		{`{"name": "query_database", "arguments": []}`, 0.6, "AttributeError: 'list' object has no attribute 'get'"},
		{`{"name": "query_database", "arguments": null}`, 0.6, "AttributeError: 'NoneType' object has no attribute 'get'"},
		{`{"name": "query_database", "arguments": {"sql": 1}}`, 0.6, "AttributeError: 'int' object has no attribute 'lower'"},
		{`{"name": "query_database", "arguments": {"sql": ["inactive"]}}`, 0.6, "AttributeError: 'list' object has no attribute 'lower'"},
		{`{"n": ` + strings.Repeat("7", 4301) + `}`, 0.1, "ValueError: Exceeds the limit (4300 digits) for integer string conversion: value has 4301 digits; use sys.set_int_max_str_digits() to increase the limit"},
		{strings.Repeat("[", 994) + strings.Repeat("]", 994), 0.1, "RecursionError: maximum recursion depth exceeded while decoding a JSON array from a unicode string"},
		// No raise: run_linter never reads its arguments; missing arguments default to {}.
		{`{"name": "run_linter", "arguments": []}`, 0.6, ""},
		{`{"name": "query_database"}`, 0.6, ""},
	}
	for _, c := range cases {
		r := ComputeMCPReward("<tool_call>"+c.body+"</tool_call>", DefaultMCPRewardConfig())
		if r.Value != c.value || r.PythonError != c.err {
			t.Errorf("%.60s: got %v %q, want %v %q", c.body, r.Value, r.PythonError, c.value, c.err)
		}
	}
}

func TestSeedPerTaskConfig(t *testing.T) {
	s := NewMCPReward(MCPRewardConfig{})
	s.PerTask = func(tk *task.Task) (MCPRewardConfig, bool) {
		if tk.ID == "lint" {
			return MCPRewardConfig{Catalog: []string{"lookup"}, QueryTool: "lookup", Argument: "q", Keyword: "orders"}, true
		}
		return MCPRewardConfig{}, false
	}
	text := `<tool_call>{"name": "lookup", "arguments": {"q": "ORDERS by id"}}</tool_call>`
	ctx := context.Background()
	got, _ := s.Score(ctx, textInput(&task.Task{ID: "lint"}, text))
	if got.Value != 1.0 {
		t.Errorf("per-task config: %v (%s)", got.Value, got.Reason)
	}
	got, _ = s.Score(ctx, textInput(&task.Task{ID: "other"}, text))
	if got.Value != -0.5 {
		t.Errorf("default config on an unknown tool: %v", got.Value)
	}
}

// TestSeedAlias: "seed", the reward's former name, still builds the user's
// compute_mcp_reward, which reports itself by its name (metrics say
// rewards/compute_mcp_reward/mean), alone or in a weighted sum.
func TestSeedAlias(t *testing.T) {
	r := NewRegistry()
	f, err := r.New("seed")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*MCPReward); !ok || f.Name() != "compute_mcp_reward" {
		t.Errorf("New(seed) = %T named %q, want *MCPReward named compute_mcp_reward", f, f.Name())
	}
	w, err := r.Parse("seed:2,format:1")
	if err != nil {
		t.Fatal(err)
	}
	text := `<tool_call>{"name": "query_database", "arguments": {"sql": "SELECT 1"}}</tool_call>`
	got, err := w.Score(context.Background(), textInput(&task.Task{ID: "t"}, text))
	if err != nil {
		t.Fatal(err)
	}
	if got.Value != 2*0.6+1 || got.Parts[0].Name != "compute_mcp_reward" {
		t.Errorf("seed:2,format:1 = %v with parts %+v, want 2.2 with compute_mcp_reward first", got.Value, got.Parts)
	}
}

func TestRegistryAndWeighted(t *testing.T) {
	r := NewRegistry()
	names := []string{"assertions", "compute_mcp_reward", "execution", "format", "hallucination", "tool_selection", "verifiable"}
	for _, n := range names {
		if _, err := r.New(n); err != nil || r.Doc(n) == "" {
			t.Errorf("%s: %v", n, err)
		}
	}
	if got := r.Names(); !slices.Equal(got, names) {
		t.Errorf("Names() = %v, want %v (no alias listed)", got, names)
	}
	if _, err := r.Parse("compute_mcp_reward,nope"); err == nil || !strings.Contains(err.Error(), `unknown reward "nope"`) {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := r.Parse("format:x"); err == nil {
		t.Error("a bad weight must be an error")
	}
	// The same reward twice would be summed twice: refused, through an alias too.
	if _, err := r.Parse("format:0.3,format:0.2"); err == nil || !strings.Contains(err.Error(), `reward "format" listed twice`) {
		t.Errorf("a repeated reward: %v", err)
	}
	if _, err := r.Parse("seed,compute_mcp_reward"); err == nil || !strings.Contains(err.Error(), `"seed" is the same reward (compute_mcp_reward)`) {
		t.Errorf("a reward repeated through its alias: %v", err)
	}
	f, err := r.Parse("format:0.3,tool_selection:0.3,hallucination:0.5")
	if err != nil {
		t.Fatal(err)
	}
	if NeedsSandbox(f) {
		t.Error("format/tool_selection/hallucination need no sandbox")
	}
	if v, _ := r.Parse("verifiable"); !NeedsSandbox(v) {
		t.Error("verifiable needs the sandbox")
	}
	tk := &task.Task{GroundTruthAssertions: []string{"SELECT 1", "exit_code == 0"}}
	in := textInput(tk, `<tool_call>{"name": "query_database", "arguments": {"sql": "SELECT 1"}}</tool_call>`)
	s, err := f.Score(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	// format 1 (one good call) * 0.3 + tool_selection 1/2 (run_linter missing) * 0.3 + hallucination 0.
	if math.Abs(s.Value-0.45) > 1e-12 {
		t.Errorf("weighted = %v", s.Value)
	}
	var bd map[string]struct {
		Weight float64 `json:"weight"`
		Score  float64 `json:"score"`
		Checks []Check `json:"checks"`
	}
	raw := Breakdown(f.Name(), s)
	if err := json.Unmarshal(raw, &bd); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if bd["tool_selection"].Weight != 0.3 || bd["tool_selection"].Score != 0.5 || len(bd["tool_selection"].Checks) != 2 || bd["format"].Score != 1 {
		t.Errorf("breakdown %s", raw)
	}
	if !strings.HasPrefix(string(raw), `{"format":`) {
		t.Errorf("parts must keep their order: %s", raw)
	}
	in = textInput(tk, `<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>`)
	if s, _ := f.Score(context.Background(), in); s.Value != -0.5 {
		t.Errorf("veto: %v", s.Value)
	}
}

func TestIsSQL(t *testing.T) {
	for s, want := range map[string]bool{
		"SELECT 1": true, "  with x as (select 1) select * from x": true, "-- c\n(SELECT 1)": true, "/* x */ select": true,
		"exit_code == 0": false, `called("query_database")`: false, "selection == 1": false, "answer contains 'SELECT'": false,
	} {
		if IsSQL(s) != want {
			t.Errorf("IsSQL(%q) != %v", s, want)
		}
	}
}

func TestInAnswer(t *testing.T) {
	for _, c := range []struct {
		answer string
		v      any
		want   bool
	}{
		{"There are 7 inactive customers.", int64(7), true},
		{"There are 17 inactive customers.", int64(7), false},
		{"7.5 percent", int64(7), false},
		{"total 3,915.70", "3915.70", true},
		{"total 3915.7.", float64(3915.7), true},
		{"id7 is it", int64(7), false},
		{"status is Inactive", "inactive", true},
		{"status is inactive2", "inactive", false},
		{"nothing", nil, false},
	} {
		if got := inAnswer(c.answer, c.v); got != c.want {
			t.Errorf("inAnswer(%q, %v) = %v", c.answer, c.v, got)
		}
	}
}

// FuzzRewards feeds arbitrary completions to every reward that needs no
// sandbox: none may panic, and each score stays in its range.
// Seed corpus: testdata/fuzz/FuzzRewards.
func FuzzRewards(f *testing.F) {
	f.Add(`<tool_call>{"name": "query_database", "arguments": {"sql": "inactive"}}</tool_call>`)
	f.Add(`<tool_call>[` + strings.Repeat("[", 1000))
	reg := NewRegistry()
	fn, err := reg.Parse("seed:1,format:0.3,tool_selection:0.3,hallucination:0.5")
	if err != nil {
		f.Fatal(err)
	}
	tk := &task.Task{GroundTruthAssertions: []string{"SELECT 1", `exit_code == 0 && called("run_linter")`}}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := fn.Score(context.Background(), textInput(tk, text))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range s.Parts {
			if p.Score.Value < -1 || p.Score.Value > 1 {
				t.Fatalf("%s out of range: %v", p.Name, p.Score.Value)
			}
		}
		if r := ComputeMCPReward(text, DefaultMCPRewardConfig()); r.Value != 0 && r.Value != 0.1 && r.Value != -0.5 && r.Value != 0.6 && r.Value != 1.0 {
			t.Fatalf("seed %v", r.Value)
		}
		if !json.Valid(Breakdown(fn.Name(), s)) {
			t.Fatalf("breakdown is not JSON")
		}
	})
}
