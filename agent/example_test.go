package agent_test

import (
	"encoding/json"
	"os"

	"github.com/mcprl/mcprl/agent"
	"github.com/mcprl/mcprl/chat"
)

// A trajectory as chat shows it: the call, the database's result, the answer.
func ExampleTranscript() {
	tr := &chat.Trajectory{
		Turns: []chat.Turn{
			{Text: "<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT COUNT(*) FROM customers\"}}\n</tool_call>",
				Calls: []chat.CallResult{{Call: chat.Call{Name: "query_database", Arguments: json.RawMessage(`{"sql": "SELECT COUNT(*) FROM customers"}`)}, Text: "COUNT(*)\n--------\n30\n(1 row)"}}},
			{Text: "There are 30 customers."},
		},
		Answer: "There are 30 customers.",
	}
	agent.Transcript(os.Stdout, tr)
	// Output:
	// call: query_database {"sql": "SELECT COUNT(*) FROM customers"}
	// result:
	//   COUNT(*)
	//   --------
	//   30
	//   (1 row)
	// answer: There are 30 customers.
}
