package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
)

// turn asks a server that answers body for one turn of maxNew tokens and
// returns the sample and its text.
func turn(t *testing.T, body string, maxNew int) (policy.Sample, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	defer srv.Close()
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	closeID, _ := tok.TokenID(toolcall.CloseTag)
	endID, _ := tok.TokenID("<|im_end|>")
	p := &openai.Policy{Client: client(t, srv.URL, openai.Config{MaxRetries: -1}), Tokenizer: tok}
	b, err := p.NewBatch(context.Background(), [][]int{{1}}, policy.SampleOptions{StopIDs: []int{closeID, endID}})
	if err != nil {
		t.Fatal(err)
	}
	b.(policy.Conversational).SetConversation(0, policy.Conversation{Messages: []chat.Message{{Role: "user", Content: "q"}}})
	out, err := b.Generate(context.Background(), []int{maxNew})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, len(out[0].IDs))
	for i, id := range out[0].IDs {
		ids[i] = int(id)
	}
	return out[0], tok.Decode(ids)
}

func reply(message any) string {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": message}}})
	return string(b)
}

func nativeCall(args any) map[string]any {
	return map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "query_database", "arguments": args}}
}

// TestObjectArguments: a tool call whose arguments are a JSON object (not
// the JSON text OpenAI's API writes) is read, and does not fail the reply.
func TestObjectArguments(t *testing.T) {
	s, text := turn(t, reply(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
		nativeCall(map[string]any{"sql": "SELECT 1"}), nativeCall(`{"sql": "SELECT 2"}`)}}), 256)
	if s.Err != nil {
		t.Fatalf("reply with object arguments: %v", s.Err)
	}
	ps := toolcall.Parse(text)
	if len(ps) != 2 || ps[0].Err != nil || string(ps[0].Call.Arguments) != `{"sql":"SELECT 1"}` || ps[1].Err != nil {
		t.Fatalf("calls %+v in %q", ps, text)
	}
}

// TestNullMessage: a choice with "message": null is an error for its
// sequence, not an empty answer.
func TestNullMessage(t *testing.T) {
	s, _ := turn(t, `{"choices": [{"index": 0, "finish_reason": "stop", "message": null}]}`, 64)
	if s.Err == nil || !strings.Contains(s.Err.Error(), "no message") {
		t.Fatalf("message null: %+v", s)
	}
	s, _ = turn(t, `{"choices": [{"index": 0, "finish_reason": "stop"}]}`, 64)
	if s.Err == nil {
		t.Fatalf("no message: %+v", s)
	}
}

// TestReplyIgnoringMaxTokens: a 10 MB reply to max_tokens 16 is cut to the
// budget's bytes and read as run out of max_tokens, not encoded whole.
func TestReplyIgnoringMaxTokens(t *testing.T) {
	s, text := turn(t, completion(strings.Repeat("SELECT 1; ", 1_000_000)), 16)
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	if s.Stopped || len(text) > 16*64 {
		t.Fatalf("a 10 MB reply to max_tokens 16: stopped %v, %d bytes kept", s.Stopped, len(text))
	}
	// Native calls whose arguments go past the budget: cut, no call.
	s, text = turn(t, reply(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
		nativeCall(fmt.Sprintf(`{"sql": %q}`, strings.Repeat("x", 100_000)))}}), 16)
	if s.Err != nil || s.Stopped || len(text) > 16*64 {
		t.Fatalf("a call past the budget: err %v stopped %v, %d bytes", s.Err, s.Stopped, len(text))
	}
}

// TestCallsPerTurnCapped: 100 native calls in one reply, or 100
// <tool_call> blocks in its text, keep DefaultMaxCallsPerTurn.
func TestCallsPerTurnCapped(t *testing.T) {
	calls := make([]any, 100)
	for i := range calls {
		calls[i] = nativeCall(fmt.Sprintf(`{"sql": "SELECT %d"}`, i))
	}
	s, text := turn(t, reply(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}), 100_000)
	if n := len(toolcall.Parse(text)); s.Err != nil || n != openai.DefaultMaxCallsPerTurn || !s.Stopped {
		t.Fatalf("100 native calls: %d kept (err %v, stopped %v)", n, s.Err, s.Stopped)
	}
	one := toolcall.RenderCall(chat.Call{Name: "query_database", Arguments: json.RawMessage(`{"sql": "SELECT 1"}`)})
	s, text = turn(t, completion(strings.Repeat(one, 100)), 100_000)
	if n := len(toolcall.Parse(text)); s.Err != nil || n != openai.DefaultMaxCallsPerTurn || !strings.HasSuffix(text, toolcall.CloseTag) {
		t.Fatalf("100 calls in the text: %d kept (err %v)", n, s.Err)
	}
}

// TestAnswerOverTheLimit: an answer larger than the client's limit is a
// clear error, not retried, and not "unexpected end of JSON input".
func TestAnswerOverTheLimit(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		fmt.Fprint(w, completion(strings.Repeat("x", 4096)))
	}))
	defer srv.Close()
	_, err := client(t, srv.URL, openai.Config{MaxResponseBytes: 1024}).Complete(context.Background(), &openai.Request{})
	if err == nil || !strings.Contains(err.Error(), "larger than 1024 bytes") || strings.Contains(err.Error(), "unexpected end") {
		t.Fatalf("a 4 KB answer under a 1 KB limit: %v", err)
	}
	if n.Load() != 1 {
		t.Errorf("%d requests: an answer over the limit was retried", n.Load())
	}
}

// TestPasswordRedacted: a password in the server URL appears in no error
// and not in URL().
func TestPasswordRedacted(t *testing.T) {
	c := client(t, "http://user:hunter2@127.0.0.1:1/v1", openai.Config{MaxRetries: -1})
	if strings.Contains(c.URL(), "hunter2") {
		t.Errorf("URL() = %s", c.URL())
	}
	_, err := c.Complete(context.Background(), &openai.Request{})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("connection refused: %v", err)
	}
	if err := c.Check(context.Background(), nil, openai.Request{}); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Check: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "not json") }))
	defer srv.Close()
	c = client(t, strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1), openai.Config{MaxRetries: -1})
	if _, err := c.Complete(context.Background(), &openai.Request{}); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad answer: %v", err)
	}
	for _, bad := range []string{"ftp://user:hunter2@host/v1", "http://user:hunter2@[::1/v1"} {
		if _, err := openai.NewClient(openai.Config{URL: bad, Model: "m"}); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("NewClient(%s): %v", bad, err)
		}
	}
}
