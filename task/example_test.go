package task_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mcprl/mcprl/task"
)

// Load reports every bad line with its file, line and field; with SkipBad
// it loads the rest and counts what it skipped.
func ExampleRead() {
	fixtures := map[string]*task.Fixture{"customers": {Name: "customers"}}
	src := strings.Join([]string{
		`{"task": "Find all inactive customer records.", "fixture": "customers"}`,
		`{"task": 7}`,
		`{"task": "x", "fixture": "shop"}`,
	}, "\n")
	_, err := task.Read(strings.NewReader(src), "tasks.jsonl", task.LoadOptions{Fixtures: fixtures})
	fmt.Println(err)

	tasks, err := task.Read(strings.NewReader(src), "tasks.jsonl", task.LoadOptions{Fixtures: fixtures, SkipBad: true})
	var skipped *task.SkipError
	if errors.As(err, &skipped) {
		fmt.Println(len(tasks), "loaded,", len(skipped.Skipped), "skipped; first id:", tasks[0].ID)
	}
	// Output:
	// tasks.jsonl:2: field task: wrong type: got JSON number, want a string
	// 1 loaded, 2 skipped; first id: tasks:1
}

func ExampleLoadFixture() {
	fx, err := task.LoadFixture("../examples/fixtures/customers")
	if err != nil {
		panic(err)
	}
	fmt.Println(fx.Name, fx.Config.Tools, fx.Config.Limits.QueryTimeout, fx.Config.Limits.MaxRows)
	// Output:
	// customers [query_database run_linter] 2s 200
}
