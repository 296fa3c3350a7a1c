package reward

import (
	"context"
	"fmt"
	"strings"

	"github.com/mcprl/mcprl/internal/pycompat"
	"github.com/mcprl/mcprl/task"
)

// MCPRewardConfig holds what the user's function hard-codes: the tool catalog,
// and the tool, argument and keyword of the +0.4 check.
type MCPRewardConfig struct {
	Catalog   []string `json:"catalog,omitempty"`
	QueryTool string   `json:"query_tool,omitempty"`
	Argument  string   `json:"argument,omitempty"`
	Keyword   string   `json:"keyword,omitempty"`
	// MaxDepth is the JSON nesting depth past which Python's json.loads
	// raises RecursionError; 0 means pycompat.DefaultMaxDepth.
	MaxDepth int `json:"max_depth,omitempty"`
}

// DefaultMCPRewardConfig is the user's: ["query_database", "run_linter"], and
// +0.4 when query_database's "sql" contains "inactive" (after .lower()).
func DefaultMCPRewardConfig() MCPRewardConfig {
	return MCPRewardConfig{Catalog: []string{task.ToolQueryDatabase, task.ToolRunLinter}, QueryTool: task.ToolQueryDatabase, Argument: "sql", Keyword: "inactive"}
}

// Overlay returns c with every field that over sets (non-empty, non-zero) replacing c's.
func (c MCPRewardConfig) Overlay(over MCPRewardConfig) MCPRewardConfig {
	if over.Catalog != nil {
		c.Catalog = over.Catalog
	}
	if over.QueryTool != "" {
		c.QueryTool = over.QueryTool
	}
	if over.Argument != "" {
		c.Argument = over.Argument
	}
	if over.Keyword != "" {
		c.Keyword = over.Keyword
	}
	if over.MaxDepth != 0 {
		c.MaxDepth = over.MaxDepth
	}
	return c
}

// withDefaults fills empty fields from the user's configuration.
func (c MCPRewardConfig) withDefaults() MCPRewardConfig {
	if c.Catalog != nil && c.QueryTool != "" && c.Argument != "" && c.Keyword != "" && c.MaxDepth != 0 {
		return c
	}
	d := DefaultMCPRewardConfig()
	d.MaxDepth = pycompat.DefaultMaxDepth
	return d.Overlay(c)
}

// The stages of compute_mcp_reward: how far a completion got through compute_mcp_reward.
const (
	StageNoTag       = "no_tag"       // 0.0: no <tool_call>...</tool_call>
	StageBadJSON     = "bad_json"     // 0.1: json.loads raised JSONDecodeError
	StageUnknownTool = "unknown_tool" // -0.5: name not in the catalog
	StageKnownTool   = "known_tool"   // 0.6: valid JSON, known tool
	StageKeyword     = "keyword"      // 1.0: query_database SQL contains the keyword
)

// MCPRewardResult is the outcome of compute_mcp_reward on one completion.
type MCPRewardResult struct {
	Value float64
	Stage string
	// PythonError is the exception the Python function raises on this
	// completion ("AttributeError: 'list' object has no attribute 'get'"),
	// "" when it returns normally. Python crashes the whole batch there;
	// mcprl gives the documented Value instead:
	//   - JSON that is not an object (list, str, number, null):      0.1, as unparseable
	//   - an int of more than 4300 digits (ValueError) or nesting
	//     past the recursion limit (RecursionError):               0.1, as unparseable
	//   - query_database with "arguments" not an object, or "sql"
	//     not a string (AttributeError):                           0.6, known tool without the keyword bonus
	PythonError string
}

// ComputeMCPReward is the user's compute_mcp_reward for one completion text,
// reproduced with CPython 3.11's semantics: re.search(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL)
// takes the first opening tag and the first closing tag after it;
// .strip() removes Python's whitespace set; json.loads follows pycompat;
// `name not in catalog` is str equality; .lower() is Python's full mapping.
func ComputeMCPReward(text string, cfg MCPRewardConfig) MCPRewardResult {
	const open, close = "<tool_call>", "</tool_call>"
	i := strings.Index(text, open)
	if i < 0 {
		return MCPRewardResult{Value: 0.0, Stage: StageNoTag}
	}
	body := text[i+len(open):]
	j := strings.Index(body, close)
	if j < 0 {
		return MCPRewardResult{Value: 0.0, Stage: StageNoTag}
	}
	raw := pycompat.Strip(body[:j])
	depth := cfg.MaxDepth
	if depth == 0 {
		depth = pycompat.DefaultMaxDepth
	}
	obj, err := pycompat.LoadsCall(raw, cfg.Argument, depth)
	if err != nil {
		r := MCPRewardResult{Value: 0.1, Stage: StageBadJSON}
		if pe, ok := err.(*pycompat.Error); ok && pe.Class != pycompat.JSONDecodeError {
			r.PythonError = pe.Error()
		}
		return r
	}
	score := 0.0
	score += 0.3
	if obj.Kind != pycompat.DictKind {
		return MCPRewardResult{Value: 0.1, Stage: StageBadJSON, PythonError: attrError(obj.Kind, "get")}
	}
	known := false
	if obj.Name.Present && obj.Name.Kind == pycompat.StrKind {
		for _, c := range cfg.Catalog {
			if obj.Name.Str == c {
				known = true
				break
			}
		}
	}
	if !known {
		return MCPRewardResult{Value: -0.5, Stage: StageUnknownTool}
	}
	score += 0.3
	if obj.Name.Str != cfg.QueryTool {
		return MCPRewardResult{Value: score, Stage: StageKnownTool}
	}
	if !obj.Args.Present {
		return MCPRewardResult{Value: score, Stage: StageKnownTool} // {}.get("sql", "") is ""
	}
	if obj.Args.Kind != pycompat.DictKind {
		return MCPRewardResult{Value: score, Stage: StageKnownTool, PythonError: attrError(obj.Args.Kind, "get")}
	}
	if !obj.Arg.Present {
		return MCPRewardResult{Value: score, Stage: StageKnownTool}
	}
	if obj.Arg.Kind != pycompat.StrKind {
		return MCPRewardResult{Value: score, Stage: StageKnownTool, PythonError: attrError(obj.Arg.Kind, "lower")}
	}
	if strings.Contains(pycompat.Lower(obj.Arg.Str), cfg.Keyword) {
		score += 0.4
		return MCPRewardResult{Value: score, Stage: StageKeyword}
	}
	return MCPRewardResult{Value: score, Stage: StageKnownTool}
}

func attrError(k pycompat.Kind, attr string) string {
	return fmt.Sprintf("AttributeError: '%s' object has no attribute '%s'", k.TypeName(), attr)
}

// MCPRewardName is the name of the user's reward function, compute_mcp_reward:
// its registry name, its key in metrics (rewards/compute_mcp_reward/mean) and
// breakdowns. Configs and --reward also accept its former name, "seed".
const MCPRewardName = "compute_mcp_reward"

// MCPReward is the user's compute_mcp_reward as a Func, over the concatenated
// assistant text of the trajectory.
type MCPReward struct {
	Config MCPRewardConfig
	// PerTask, when set, gives a task its own configuration (empty fields
	// fall back to Config).
	PerTask func(*task.Task) (MCPRewardConfig, bool)
}

// NewMCPReward returns the compute_mcp_reward reward with cfg (empty fields: the user's).
func NewMCPReward(cfg MCPRewardConfig) *MCPReward { return &MCPReward{Config: cfg.withDefaults()} }

// Name implements Func.
func (s *MCPReward) Name() string { return MCPRewardName }

// ConfigFor returns the configuration applied to t.
func (s *MCPReward) ConfigFor(t *task.Task) MCPRewardConfig {
	cfg := s.Config.withDefaults()
	if s.PerTask != nil && t != nil {
		if c, ok := s.PerTask(t); ok {
			cfg = cfg.Overlay(c)
		}
	}
	return cfg
}

// ScoreText is compute_mcp_reward on one completion text of task t.
func (s *MCPReward) ScoreText(t *task.Task, text string) MCPRewardResult {
	return ComputeMCPReward(text, s.ConfigFor(t))
}

// Score implements Func.
func (s *MCPReward) Score(ctx context.Context, in *Input) (Score, error) {
	text := ""
	if in.Trajectory != nil {
		text = in.Trajectory.Completion()
	}
	r := ComputeMCPReward(text, s.ConfigFor(in.Task))
	reason := r.Stage
	if r.PythonError != "" {
		reason += " (Python raises " + r.PythonError + ")"
	}
	return Score{Value: r.Value, Reason: reason}, nil
}
