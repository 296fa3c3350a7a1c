package reward_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/reward"
)

// ExampleOpenCompletions scores completions the way `mcprl score` does,
// with compute_mcp_reward (no tasks, no sandbox).
func ExampleOpenCompletions() {
	sc, err := reward.OpenCompletions(reward.ScoringConfig{Rewards: "compute_mcp_reward", Workers: 1})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	in := `{"task_id": "a", "completion": "<tool_call>{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT 1\"}}</tool_call>"}` + "\n" +
		`{"task_id": "b", "completion": "no call"}` + "\n"
	if err := sc.Score(context.Background(), strings.NewReader(in), "stdin", os.Stdout, os.Stderr); err != nil {
		panic(err)
	}
	// Output:
	// {"index":0,"task_id":"a","reward":0.6,"breakdown":{"compute_mcp_reward":{"weight":1,"score":0.6,"reason":"known_tool"}}}
	// {"index":1,"task_id":"b","reward":0,"breakdown":{"compute_mcp_reward":{"weight":1,"score":0,"reason":"no_tag"}}}
}

// TestOpenCompletionsErrors: a reward that runs tool calls needs the
// tasks and the fixtures; a bad reward name or settings file fails.
func TestOpenCompletionsErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  reward.ScoringConfig
		want string
	}{
		{reward.ScoringConfig{Rewards: "verifiable"}, "give --tasks and --fixtures"},
		{reward.ScoringConfig{Rewards: "nope"}, "nope"},
		{reward.ScoringConfig{Rewards: "compute_mcp_reward", MCPRewardConfig: t.TempDir() + "/none.json"}, "none.json"},
	} {
		if _, err := reward.OpenCompletions(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want it to say %q", c.cfg, err, c.want)
		}
	}
}

// TestOpenCompletionsLive: with tasks and fixtures, a live reward forks the
// task's sandbox; tasks without an id get their line number.
func TestOpenCompletionsLive(t *testing.T) {
	sc, err := reward.OpenCompletions(reward.ScoringConfig{Rewards: "assertions",
		TasksPath: "../examples/customers/tasks.jsonl", FixturesDir: "../examples/fixtures", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sc.Close(); err != nil {
			t.Error(err)
		}
	}()
	if sc.Fork == nil || len(sc.Tasks) == 0 {
		t.Fatalf("fork %v, %d tasks", sc.Fork != nil, len(sc.Tasks))
	}
}

// TestRegistryHelp lists every reward with its doc.
func TestRegistryHelp(t *testing.T) {
	r := reward.NewRegistry()
	h := r.Help()
	for _, n := range r.Names() {
		if !strings.Contains(h, "\n  "+n) {
			t.Errorf("help lacks %s: %s", n, h)
		}
	}
}
