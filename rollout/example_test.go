package rollout_test

import (
	"context"
	"fmt"

	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

// A scripted policy (rollout.Script) plays two turns of the seed task against
// live sandbox forks: a query, then an answer. With a model, use
// &model.Policy{M: m, CompletionSlots: ...} instead.
func ExampleRunner_Run() {
	ctx := context.Background()
	tok, _ := tokenizer.Small()
	tpl, _ := tok.Template()
	fx, _ := task.LoadFixture("../examples/fixtures/customers")
	f, _ := sandbox.NewFactory(ctx, fx, sandbox.Options{})
	defer f.Close()

	turn := tok.Encode
	r := &rollout.Runner{
		Policy: &rollout.Script{Scripts: [][][]int{{
			turn("<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT COUNT(*) AS n FROM customers WHERE status = 'inactive'\"}}\n</tool_call>"),
			turn("There are 7 inactive customers.<|im_end|>"),
		}}},
		Tokenizer: tok,
		Template:  tpl,
		Config:    rollout.Config{NumGenerations: 2, MaxCompletionLength: 512, MaxToolCallingIterations: 3},
	}
	tk := &task.Task{ID: "seed", Fixture: "customers", Task: "How many customers are inactive?"}
	trajs, err := r.Run(ctx, []rollout.Job{{Task: tk, Factory: f}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range trajs {
		sampled := 0
		for _, m := range t.Mask {
			sampled += int(m)
		}
		fmt.Printf("%d turns, tool said %q, answer %q, %d of %d tokens sampled\n",
			len(t.Turns), t.Calls()[0].Text, t.Answer, sampled, len(t.Tokens)-t.PromptLen)
	}
	// Output:
	// 2 turns, tool said "n\n-\n7\n(1 row)", answer "There are 7 inactive customers.", 72 of 109 tokens sampled
	// 2 turns, tool said "n\n-\n7\n(1 row)", answer "There are 7 inactive customers.", 72 of 109 tokens sampled
}
