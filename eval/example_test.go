package eval_test

import (
	"context"
	"fmt"
	"os"

	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

// pass@k from 10 samples of which 3 passed.
func ExamplePassAtK() {
	for _, k := range []int{1, 5, 8} {
		p, _ := eval.PassAtK(10, 3, k)
		fmt.Printf("pass@%d = %.4f\n", k, p)
	}
	// Output:
	// pass@1 = 0.3000
	// pass@5 = 0.9167
	// pass@8 = 1.0000
}

// Evaluate the golden trajectories of the example tasks in live SQLite
// sandboxes and print the report.
func ExampleEvaluator() {
	ctx := context.Background()
	fixtures, _ := task.LoadFixtures("../examples/fixtures")
	tasks, _ := task.Load("../examples/customers/tasks.jsonl", task.LoadOptions{Fixtures: fixtures})
	factory, _ := sandbox.NewFactory(ctx, fixtures["customers"], sandbox.Options{})
	defer factory.Close()
	tok, _ := tokenizer.Small()
	tpl, _ := tok.Template()
	iters, _ := eval.GoldenIterations(tasks)
	ev := &eval.Evaluator{
		Policy: eval.Golden(tok), Tokenizer: tok, Template: tpl,
		Sandboxes: map[string]*sandbox.Factory{"customers": factory},
		Config:    eval.Config{Samples: 1, MaxCompletionLength: 4096, MaxToolCallingIterations: iters},
	}
	samples, err := ev.Run(ctx, tasks)
	if err != nil {
		fmt.Println(err)
		return
	}
	report, _ := eval.Summarize(samples, 1)
	report.WriteTable(os.Stdout)
	// The lint golden's empty result (a LIMIT 0 look at the columns) is a setback it does not correct: it ends there.
	//
	// Output:
	// category   tasks  traj  errors  success  pass@1  tool acc  halluc  format err  turns   self-corr
	// overall        8     8       0   100.0%  100.0%    100.0%    0.0%        0.0%   2.50  0.0% (0/1)
	// integrity      2     2       0   100.0%  100.0%    100.0%    0.0%        0.0%   2.00     - (0/0)
	// lint           1     1       0   100.0%  100.0%    100.0%    0.0%        0.0%   3.00  0.0% (0/1)
	// seed           1     1       0   100.0%  100.0%    100.0%    0.0%        0.0%   4.00     - (0/0)
	// sql-read       3     3       0   100.0%  100.0%    100.0%    0.0%        0.0%   2.00     - (0/0)
	// sql-write      1     1       0   100.0%  100.0%    100.0%    0.0%        0.0%   3.00     - (0/0)
}
