package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// chat, driven through stdin, runs the customers base model against a live
// customers sandbox and shows the call, the database's result and the
// answer; "exit" stops it.
func TestChat(t *testing.T) {
	first, _, _ := strings.Cut(string(must(os.ReadFile("../../examples/customers/quick_tasks.jsonl"))), "\n")
	var tk struct {
		SystemPrompt string `json:"system_prompt"`
	}
	if err := json.Unmarshal([]byte(first), &tk); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"chat", "--model", customersBase, "--fixture", fixturesRoot + "/customers", "--system-prompt", tk.SystemPrompt, "--max-completion-length", "192"})
	root.SetIn(strings.NewReader("How many customers have the status inactive?\n\nexit\nnever asked\n"))
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut.String())
	}
	got := out.String()
	for _, want := range []string{
		"question: How many customers have the status inactive?\n",
		`call: query_database {"sql": "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"}` + "\n",
		"result:\n  COUNT(*)\n  --------\n  7\n",
		"answer: 7 customers are inactive.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("transcript lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "never asked") || strings.Count(got, "question:") != 1 {
		t.Errorf("chat went on after exit:\n%s", got)
	}
	if _, _, err := runCmd("chat", "--fixture", fixturesRoot+"/customers"); err == nil || !strings.Contains(err.Error(), "give one policy") {
		t.Errorf("no policy: %v", err)
	}
}
