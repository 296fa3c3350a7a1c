package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// One factory per fixture, one sandbox per trajectory: each trajectory's
// tool calls go through its own MCP session to its own database fork.
func Example() {
	ctx := context.Background()
	fx, err := task.LoadFixture("../examples/fixtures/customers")
	if err != nil {
		log.Fatal(err)
	}
	f, err := sandbox.NewFactory(ctx, fx, sandbox.Options{}) // embedded SQLite
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	for _, t := range f.Tools() {
		fmt.Println("tool:", t.Name)
	}

	s, err := f.Fork(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	res, err := s.Call(ctx, "query_database", json.RawMessage(`{"sql": "SELECT COUNT(*) AS n FROM customers WHERE status = 'inactive'"}`))
	if err != nil {
		log.Fatal(err) // the tool server failed; SQL errors come back as results
	}
	fmt.Println(sandbox.ResultText(res))

	res, err = s.Call(ctx, "run_linter", json.RawMessage(`{"path": "cleanup_inactive.sql"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.StructuredContent.(map[string]any)["exit_code"])

	res, _ = s.Call(ctx, "drop_everything", nil)
	fmt.Println(res.IsError, sandbox.ResultText(res))
	// Output:
	// tool: query_database
	// tool: run_linter
	// n
	// -
	// 7
	// (1 row)
	// 1
	// true unknown tool "drop_everything"; available tools: query_database, run_linter
}
