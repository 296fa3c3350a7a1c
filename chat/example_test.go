package chat_test

import (
	"encoding/json"
	"fmt"

	"github.com/mcprl/mcprl/chat"
)

// A trajectory's turns as saved for inspection: a well-formed call keeps its arguments and result, a
// malformed one its parse error, and arguments that are not JSON are left out.
func ExampleTrajectory_Records() {
	tr := &chat.Trajectory{Turns: []chat.Turn{{
		Text: `<tool_call>{"name": "query_database", "arguments": {"sql": "SELECT 1"}}</tool_call><tool_call>{oops</tool_call>`,
		Calls: []chat.CallResult{
			{Call: chat.Call{Name: "query_database", Arguments: json.RawMessage(`{"sql": "SELECT 1"}`)}, Text: `[{"1": 1}]`},
			{Call: chat.Call{Arguments: json.RawMessage(`{oops`)}, ParseError: "invalid JSON"},
		},
	}}}
	b, err := json.Marshal(tr.Records()[0].Calls)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
	// Output: [{"name":"query_database","arguments":{"sql":"SELECT 1"},"result":"[{\"1\": 1}]"},{"name":"","parse_error":"invalid JSON","result":""}]
}
