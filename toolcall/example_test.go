package toolcall_test

import (
	"fmt"

	"github.com/mcprl/mcprl/toolcall"
)

func ExampleParse() {
	text := `Let me look.<tool_call>{"name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM customers"}}</tool_call>` +
		`<tool_call>{"name": "run_linter", "arguments": [1]}</tool_call>`
	for _, p := range toolcall.Parse(text) {
		if p.Err != nil {
			fmt.Println("error:", p.Err.Kind, "-", p.Err)
			continue
		}
		fmt.Println(p.Call.Name, string(p.Call.Arguments))
	}
	// Output:
	// query_database {"sql": "SELECT COUNT(*) FROM customers"}
	// error: bad_arguments - tool call "run_linter": "arguments" must be a JSON object
}
