package reward_test

import (
	"context"
	"fmt"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/reward"
)

func ExampleComputeMCPReward() {
	cfg := reward.DefaultMCPRewardConfig()
	for _, text := range []string{
		"I don't know.",
		`<tool_call>{"name": "query_database", "arguments": {"sql": "SELECT * FROM customers WHERE status = 'INACTIVE'"}}</tool_call>`,
		`<tool_call>{"name": "query_database", "arguments": {"sql": "SELECT * FROM customers WHERE status = '\u0130NACTIVE'"}}</tool_call>`,
		`<tool_call>{"name": "drop_table"}</tool_call>`,
		`<tool_call>["query_database"]</tool_call>`,
	} {
		r := reward.ComputeMCPReward(text, cfg)
		if r.PythonError != "" {
			fmt.Println(r.Value, r.Stage, "-", r.PythonError)
			continue
		}
		fmt.Println(r.Value, r.Stage)
	}
	// Output:
	// 0 no_tag
	// 1 keyword
	// 0.6 known_tool
	// -0.5 unknown_tool
	// 0.1 bad_json - AttributeError: 'list' object has no attribute 'get'
}

func ExampleRegistry_Parse() {
	f, err := reward.NewRegistry().Parse("seed:1,format:0.3,hallucination:0.5")
	if err != nil {
		panic(err)
	}
	text := `<tool_call>{"name": "run_linter", "arguments": {"path": "schema.sql"}}</tool_call>`
	traj := &chat.Trajectory{Turns: []chat.Turn{{Text: text, Calls: []chat.CallResult{{}}}}}
	traj.Turns[0].Calls[0].Call.Name = "run_linter"
	s, err := f.Score(context.Background(), &reward.Input{Trajectory: traj})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Value)
	fmt.Println(string(reward.Breakdown(f.Name(), s)))
	// Output:
	// 0.8999999999999999
	// {"compute_mcp_reward":{"weight":1,"score":0.6,"reason":"known_tool"},"format":{"weight":0.3,"score":1,"reason":"1 well-formed calls"},"hallucination":{"weight":0.5,"score":0}}
}
