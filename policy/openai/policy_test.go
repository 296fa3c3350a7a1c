package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
)

func customers(t *testing.T) *sandbox.Factory {
	t.Helper()
	fx, err := task.LoadFixtures("../../examples/fixtures")
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandbox.NewFactory(context.Background(), fx["customers"], sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func runner(t *testing.T, url string) *rollout.Runner {
	t.Helper()
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, url, openai.Config{MaxRetries: 1})
	return &rollout.Runner{
		Policy: &openai.Policy{Client: c, Tokenizer: tok}, Tokenizer: tok, Template: tpl,
		Config: rollout.Config{NumGenerations: 2, MaxCompletionLength: 512, MaxToolCallingIterations: 2},
	}
}

// A server that calls query_database natively on the first turn and
// answers on the second: the rollout runs the call in the sandbox, sends
// the result back under the call's id, and records the turn in the
// <tool_call> form of Qwen2.5's template.
func TestPolicyNativeToolCalls(t *testing.T) {
	var mu sync.Mutex
	var reqs []openai.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req openai.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		mu.Lock()
		reqs = append(reqs, req)
		mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		n := max(req.N, 1)
		var choices []any
		for k := range n {
			if last.Role == "tool" {
				choices = append(choices, map[string]any{"index": k, "finish_reason": "stop",
					"message": map[string]any{"role": "assistant", "content": "There are " + strings.TrimSpace(last.Content) + " inactive customers."}})
				continue
			}
			choices = append(choices, map[string]any{"index": k, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": nil,
				"tool_calls": []any{map[string]any{"id": fmt.Sprint("call-", k), "type": "function",
					"function": map[string]any{"name": "query_database", "arguments": `{"sql": "SELECT COUNT(*) AS n FROM customers WHERE status = 'inactive'"}`}}},
			}})
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": choices})
	}))
	defer srv.Close()
	r := runner(t, srv.URL)
	tk := &task.Task{ID: "t", Task: "How many customers are inactive?", Fixture: "customers"}
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: tk, Factory: customers(t)}})
	if err != nil {
		t.Fatal(err)
	}
	wantCall := "<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT COUNT(*) AS n FROM customers WHERE status = 'inactive'\"}}\n</tool_call>"
	for i, tr := range trajs {
		if tr.Error != "" || len(tr.Turns) != 2 {
			t.Fatalf("trajectory %d: error %q, %d turns", i, tr.Error, len(tr.Turns))
		}
		c := tr.Turns[0].Calls
		if tr.Turns[0].Text != wantCall || len(c) != 1 || c[0].IsError || c[0].ParseError != "" || !strings.Contains(c[0].Text, "7") {
			t.Errorf("trajectory %d, turn 1: %q, calls %+v", i, tr.Turns[0].Text, c)
		}
		if !strings.HasPrefix(tr.Answer, "There are ") || !strings.Contains(tr.Answer, "7") {
			t.Errorf("trajectory %d: answer %q", i, tr.Answer)
		}
	}
	// One request with n=2 for the shared first turn, then one per trajectory.
	if len(reqs) != 3 || reqs[0].N != 2 {
		t.Fatalf("%d requests, first with n=%d; want 3, n=2", len(reqs), reqs[0].N)
	}
	for _, req := range reqs[1:] {
		m := req.Messages
		if len(req.Tools) != 2 || len(m) != 3 || len(m[1].ToolCalls) != 1 || m[2].Role != "tool" || m[2].ToolCallID != m[1].ToolCalls[0].ID {
			t.Errorf("second-turn request: %d tools, messages %+v", len(req.Tools), m)
		}
	}
}

// A server that always fails ends every trajectory with the reason, and the
// run goes on: no trajectory is scored as if the model had answered.
func TestPolicyServerFailureEndsTrajectory(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"detail": "CUDA out of memory"}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	r := runner(t, srv.URL)
	tk := &task.Task{ID: "t", Task: "How many customers are inactive?", Fixture: "customers"}
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: tk, Factory: customers(t)}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range trajs {
		if !strings.Contains(tr.Error, "policy: HTTP 500: CUDA out of memory (after 2 attempts)") || len(tr.Turns) != 0 {
			t.Errorf("trajectory %d: error %q, %d turns", i, tr.Error, len(tr.Turns))
		}
	}
}

// How replies become turn text: native calls in the template's form, a
// text call whose </tool_call> the server cut as a stop string closed
// again, plain answers and truncated replies as they are.
func TestText(t *testing.T) {
	calls := []openai.ToolCall{
		{Type: "function", Function: openai.Function{Name: "a", Arguments: `{"x": 1}`}},
		{Type: "function", Function: openai.Function{Name: "b", Arguments: `not json`}},
	}
	got := openai.Text("Let me look.", calls)
	want := "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": \"not json\"}\n</tool_call>"
	if got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}
