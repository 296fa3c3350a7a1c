package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/internal/pgtest"
	"github.com/mcprl/mcprl/internal/pycompat"
	"github.com/mcprl/mcprl/reward"
)

const seedCorpus = "../../reward/testdata/seed/corpus.jsonl"

type scoreLine struct {
	Index     int                        `json:"index"`
	Line      int                        `json:"line"`
	TaskID    string                     `json:"task_id"`
	Reward    *float64                   `json:"reward"`
	Breakdown map[string]json.RawMessage `json:"breakdown"`
	Error     string                     `json:"error"`
}

func parseScores(t testing.TB, out []byte) []scoreLine {
	t.Helper()
	var res []scoreLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l scoreLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		res = append(res, l)
	}
	return res
}

func runScoreCmd(t *testing.T, c reward.ScoringConfig, completions string) ([]scoreLine, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := c.ScoreFile(context.Background(), completions, nil, &out, &errOut); err != nil {
		t.Fatalf("score: %v\n%s", err, errOut.String())
	}
	return parseScores(t, out.Bytes()), errOut.String()
}

// TestScoreMCPRewardCorpus: every line of the parity corpus scored in input
// order, equal to reward.ComputeMCPReward, the same with 1 and 4 workers,
// and with the reward's former name, seed.
func TestScoreMCPRewardCorpus(t *testing.T) {
	data, err := os.ReadFile(seedCorpus)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	one, _ := runScoreCmd(t, reward.ScoringConfig{Rewards: "compute_mcp_reward", Workers: 1}, seedCorpus)
	four, _ := runScoreCmd(t, reward.ScoringConfig{Rewards: "compute_mcp_reward", Workers: 4}, seedCorpus)
	alias, _ := runScoreCmd(t, reward.ScoringConfig{Rewards: "seed", Workers: 2}, seedCorpus)
	if len(one) != len(lines) || len(four) != len(lines) || len(alias) != len(lines) {
		t.Fatalf("%d lines in, %d, %d and %d out", len(lines), len(one), len(four), len(alias))
	}
	for i, l := range lines {
		v, err := pycompat.Loads(l)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := v.Get("completion")
		want := reward.ComputeMCPReward(c.Str, reward.DefaultMCPRewardConfig()).Value
		for _, got := range []scoreLine{one[i], four[i], alias[i]} {
			if got.Index != i || got.Reward == nil || *got.Reward != want || got.TaskID != "seed" || got.Breakdown["compute_mcp_reward"] == nil {
				t.Fatalf("line %d: %+v, want reward %v", i+1, got, want)
			}
		}
	}
}

// TestScoreBadLines: bad lines are reported with their line numbers and
// scored as errors; the rest of the run goes on.
func TestScoreBadLines(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	body := `{"task_id": "a", "completion": "<tool_call>{\"name\": \"run_linter\"}</tool_call>"}
[1, 2]

{"task_id": "b", "completion": 3}
{"task_id": "c"
{"task_id": "d", "completion": "no call"}
`
	if err := os.WriteFile(in, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got, stderr := runScoreCmd(t, reward.ScoringConfig{Rewards: "compute_mcp_reward"}, in)
	if len(got) != 5 {
		t.Fatalf("want 5 output lines (blank line skipped), got %+v", got)
	}
	if *got[0].Reward != 0.6 || *got[4].Reward != 0 || got[4].TaskID != "d" {
		t.Errorf("good lines: %+v %+v", got[0], got[4])
	}
	for i, line := range map[int]int{1: 2, 2: 4, 3: 5} {
		if got[i].Reward != nil || got[i].Error == "" || got[i].Line != line || got[i].Index != i {
			t.Errorf("bad line %d: %+v", line, got[i])
		}
		if !strings.Contains(stderr, fmt.Sprintf("c.jsonl:%d: ", line)) {
			t.Errorf("stderr does not name line %d:\n%s", line, stderr)
		}
	}
	if !strings.Contains(stderr, "3 of 5 lines could not be scored") {
		t.Errorf("stderr: %s", stderr)
	}
}

// TestScoreLive runs completions' calls in the example fixture's sandbox
// (SQLite and PostgreSQL) and scores them with assertions and the
// verifiable composition.
func TestScoreLive(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	call := func(name, args string) string {
		return fmt.Sprintf("<tool_call>{\"name\": %q, \"arguments\": %s}</tool_call>", name, args)
	}
	good := call("query_database", `{"sql": "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"}`) +
		call("run_linter", `{"path": "inactive_customers.sql"}`) + "There are 7 inactive customers."
	var b strings.Builder
	for _, c := range []struct{ id, text string }{
		{"customers-inactive-001", good},
		{"customers-inactive-001", "There are 7 inactive customers."},
		{"customers-inactive-001", good + call("drop_database", "{}")},
		{"no-such-task", good},
		{"customers-inactive-variants-002", call("query_database", `{"sql": "SELECT COUNT(*) FROM customers WHERE LOWER(TRIM(status)) = 'inactive'"}`)},
	} {
		line, _ := json.Marshal(map[string]string{"task_id": c.id, "completion": c.text})
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			dsn := ""
			if backend == "postgres" {
				dsn = pgtest.DSN(t)
			}
			got, _ := runScoreCmd(t, reward.ScoringConfig{Rewards: "assertions,verifiable:1",
				TasksPath: "../../examples/customers/tasks.jsonl", FixturesDir: "../../examples/fixtures", DSN: dsn, Workers: 3}, in)
			want := []any{2.0, 0.0, 2.0 - 1.5, "unknown task_id", 2.0}
			// assertions (weight 1) + verifiable (weight 1): the honest one is 1 + 1;
			// the hallucinated tool keeps its assertions (1) and verifiable's veto (-0.5).
			for i, w := range want {
				switch w := w.(type) {
				case string:
					if got[i].Reward != nil || !strings.Contains(got[i].Error, w) {
						t.Errorf("line %d: %+v, want error %q", i+1, got[i], w)
					}
				case float64:
					if got[i].Reward == nil || math.Abs(*got[i].Reward-w) > 1e-9 {
						t.Errorf("line %d: %+v, want %v", i+1, got[i], w)
					}
				}
			}
			if len(got[0].Breakdown) != 2 || got[0].Breakdown["assertions"] == nil || got[0].Breakdown["verifiable"] == nil {
				t.Errorf("breakdown: %v", got[0].Breakdown)
			}
		})
	}
}

// TestScoreMCPRewardConfig: compute_mcp_reward's catalog and keyword set per task.
func TestScoreMCPRewardConfig(t *testing.T) {
	dir := t.TempDir()
	in, cfg := filepath.Join(dir, "c.jsonl"), filepath.Join(dir, "seed.json")
	text := `<tool_call>{"name": "lookup", "arguments": {"sql": "SELECT * FROM orders"}}</tool_call>`
	var b strings.Builder
	for _, id := range []string{"orders", "other"} {
		line, _ := json.Marshal(map[string]string{"task_id": id, "completion": text})
		b.Write(line)
		b.WriteByte('\n')
	}
	os.WriteFile(in, []byte(b.String()), 0o644)
	os.WriteFile(cfg, []byte(`{"default": {"catalog": ["lookup", "query_database"]}, "tasks": {"orders": {"query_tool": "lookup", "keyword": "orders"}}}`), 0o644)
	got, _ := runScoreCmd(t, reward.ScoringConfig{Rewards: "compute_mcp_reward", MCPRewardConfig: cfg}, in)
	if *got[0].Reward != 1.0 || *got[1].Reward != 0.6 {
		t.Errorf("per-task compute_mcp_reward config: %v %v", *got[0].Reward, *got[1].Reward)
	}
	got, _ = runScoreCmd(t, reward.ScoringConfig{Rewards: "compute_mcp_reward"}, in)
	if *got[0].Reward != -0.5 {
		t.Errorf("default catalog: %v", *got[0].Reward)
	}
}
