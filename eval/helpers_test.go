package eval_test

import (
	"context"
	"sync"
	"testing"

	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

const (
	fixturesDir   = "../examples/fixtures"
	heldoutTasks  = "../examples/experiment/heldout_tasks.jsonl"
	customerTasks = "../examples/customers/tasks.jsonl"
)

var (
	tokOnce sync.Once
	tokVal  *tokenizer.Tokenizer
	tplVal  *tokenizer.Template
	tokErr  error
)

// smallTokenizer is the real reduced Qwen2.5 tokenizer and its chat template.
func smallTokenizer(t testing.TB) (*tokenizer.Tokenizer, *tokenizer.Template) {
	t.Helper()
	tokOnce.Do(func() {
		if tokVal, tokErr = tokenizer.Small(); tokErr == nil {
			tplVal, tokErr = tokVal.Template()
		}
	})
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tokVal, tplVal
}

// loadTasks loads a task file strictly with the example fixtures and starts
// a sandbox factory per fixture it uses (dsn "" is embedded SQLite).
func loadTasks(t testing.TB, path, dsn string) ([]task.Task, map[string]*sandbox.Factory) {
	t.Helper()
	fixtures, err := task.LoadFixtures(fixturesDir)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := task.Load(path, task.LoadOptions{Fixtures: fixtures})
	if err != nil {
		t.Fatal(err)
	}
	factories := map[string]*sandbox.Factory{}
	for _, tk := range tasks {
		if factories[tk.Fixture] != nil {
			continue
		}
		f, err := sandbox.NewFactory(context.Background(), fixtures[tk.Fixture], sandbox.Options{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		factories[tk.Fixture] = f
	}
	return tasks, factories
}

// goldenEvaluator replays golden trajectories of tasks, n times each.
func goldenEvaluator(t testing.TB, tasks []task.Task, factories map[string]*sandbox.Factory, n int) *eval.Evaluator {
	t.Helper()
	tok, tpl := smallTokenizer(t)
	iters, err := eval.GoldenIterations(tasks)
	if err != nil {
		t.Fatal(err)
	}
	return &eval.Evaluator{
		Policy: eval.Golden(tok), Tokenizer: tok, Template: tpl, Sandboxes: factories,
		Config: eval.Config{Samples: n, MaxCompletionLength: 4096, MaxToolCallingIterations: iters},
	}
}
