package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprl/mcprl/policy/openai"
)

// completion is a chat completion as servers answer it.
func completion(content string) string {
	b, _ := json.Marshal(map[string]any{
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}},
	})
	return string(b)
}

func client(t *testing.T, url string, cfg openai.Config) *openai.Client {
	t.Helper()
	cfg.URL, cfg.Model = url, "m"
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	c, err := openai.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A server that fails twice with 503 (the second time with Retry-After: 0)
// then answers: the request succeeds on the third attempt.
func TestCompleteRetriesTemporaryFailures(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			t.Errorf("path %s", r.URL.Path)
		}
		switch n.Add(1) {
		case 1:
			http.Error(w, `{"error": {"message": "overloaded"}}`, http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error": "busy"}`, http.StatusTooManyRequests)
		default:
			fmt.Fprint(w, completion("hello"))
		}
	}))
	defer srv.Close()
	resp, err := client(t, srv.URL, openai.Config{}).Complete(context.Background(), &openai.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *resp.Choices[0].Message.Content; got != "hello" || n.Load() != 3 {
		t.Errorf("content %q after %d requests, want hello after 3", got, n.Load())
	}
}

// A 400 is not retried; a persistent 500 is retried MaxRetries times and
// the error says so, with the server's message.
func TestCompleteGivesUp(t *testing.T) {
	for _, tc := range []struct {
		status   int
		body     string
		attempts int32
		want     string
	}{
		{http.StatusBadRequest, `{"detail": "bad field"}`, 1, "HTTP 400: bad field"},
		{http.StatusInternalServerError, `{"error": {"message": "parser crashed"}}`, 3, "HTTP 500: parser crashed (after 3 attempts)"},
	} {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			http.Error(w, tc.body, tc.status)
		}))
		_, err := client(t, srv.URL, openai.Config{MaxRetries: 2}).Complete(context.Background(), &openai.Request{})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) || n.Load() != tc.attempts {
			t.Errorf("HTTP %d: error %v after %d attempts, want %q after %d", tc.status, err, n.Load(), tc.want, tc.attempts)
		}
	}
}

// A server that does not answer within the timeout fails the request.
func TestCompleteTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	_, err := client(t, srv.URL, openai.Config{Timeout: 100 * time.Millisecond, MaxRetries: -1}).Complete(context.Background(), &openai.Request{})
	if err == nil || !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Errorf("error %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// No more than Concurrency requests are in flight at once.
func TestCompleteConcurrencyLimit(t *testing.T) {
	var in, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := in.Add(1)
		for {
			m := most.Load()
			if cur <= m || most.CompareAndSwap(m, cur) {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
		in.Add(-1)
		fmt.Fprint(w, completion("x"))
	}))
	defer srv.Close()
	c := client(t, srv.URL, openai.Config{Concurrency: 2})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Complete(context.Background(), &openai.Request{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m != 2 {
		t.Errorf("%d requests in flight at most, want 2", m)
	}
}

// Check tells apart the ways a server can be unusable.
func TestCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	err = client(t, closed, openai.Config{}).Check(context.Background(), nil, openai.Request{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the chat-completions server at "+closed+"/v1") {
		t.Errorf("closed port: %v", err)
	}

	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		// Ollama's answer for a model without tool support.
		{http.StatusBadRequest, `{"error": "registry.ollama.ai/library/gemma:2b does not support tools"}`, `does not accept tool calls for model "m"`},
		// vLLM's answer for an unknown model.
		{http.StatusNotFound, `{"error": {"message": "The model ` + "`m`" + ` does not exist."}}`, `does not serve model "m" (its /models lists: served-1)`},
		{http.StatusUnauthorized, `{"error": {"message": "bad key"}}`, "refused the API key"},
		{http.StatusBadRequest, `{"error": {"message": "top_k is not supported"}}`, "refused a test request"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/models" {
				fmt.Fprint(w, `{"object": "list", "data": [{"id": "served-1"}]}`)
				return
			}
			var req openai.Request
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Tools) == 0 || req.MaxTokens != 1 {
				t.Errorf("probe %+v (%v): want tools and max_tokens 1", req, err)
			}
			http.Error(w, tc.body, tc.status)
		}))
		err := client(t, srv.URL, openai.Config{}).Check(context.Background(), nil, openai.Request{})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("HTTP %d %s: %v, want %q", tc.status, tc.body, err, tc.want)
		}
	}
}

func TestNewClientRejectsBadConfig(t *testing.T) {
	for _, cfg := range []openai.Config{{URL: "localhost:8000", Model: "m"}, {URL: "http://localhost:8000"}} {
		if _, err := openai.NewClient(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
