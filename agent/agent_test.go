package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/agent"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

// Converse runs each question of its input in a live customers sandbox
// (here with a scripted policy: a query, then an answer), writes the
// question and its transcript, skips blank lines and stops at "exit".
func TestConverse(t *testing.T) {
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	fx, err := task.LoadFixture("../examples/fixtures/customers")
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandbox.NewFactory(context.Background(), fx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var script [][]int
	for _, turn := range []string{
		"<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT COUNT(*) FROM customers WHERE status = 'inactive'\"}}\n</tool_call>",
		"7 customers are inactive.<|im_end|>",
	} {
		script = append(script, tok.Encode(turn))
	}
	a := &agent.Agent{
		Runner: &rollout.Runner{Policy: &rollout.Script{Scripts: [][][]int{script}}, Tokenizer: tok, Template: tpl,
			Config: rollout.Config{MaxCompletionLength: 512, MaxToolCallingIterations: 2}},
		Sandbox: f,
	}
	var out, prompt strings.Builder
	in := "How many customers are inactive?\n\n  \nAnd now?\nexit\nnever asked\n"
	if err := a.Converse(context.Background(), strings.NewReader(in), &out, &prompt); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"question: How many customers are inactive?\n",
		`call: query_database {"sql": "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"}` + "\n",
		"result:\n  COUNT(*)\n  --------\n  7\n",
		"answer: 7 customers are inactive.\n",
		"question: And now?\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("transcript lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "never asked") || strings.Count(got, "question:") != 2 || strings.Count(got, "answer:") != 2 {
		t.Errorf("want two questions answered, then a stop at exit:\n%s", got)
	}
	if p := prompt.String(); p != strings.Repeat("> ", 5) {
		t.Errorf("prompts %q, want one per line read up to exit", p)
	}
	prompt.Reset()
	if err := a.Converse(context.Background(), strings.NewReader(""), &out, &prompt); err != nil || prompt.String() != "> \n" {
		t.Errorf("end of input: %v, prompts %q", err, prompt.String())
	}
}
