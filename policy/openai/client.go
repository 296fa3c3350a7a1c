package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config describes a server and how to talk to it.
type Config struct {
	// URL is the API's base URL as OpenAI's SDKs take it
	// (http://localhost:8000/v1); a URL with no path gets /v1.
	URL string
	// Model is the served model's name (the request's "model").
	Model string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// Timeout bounds one request (default 5 minutes).
	Timeout time.Duration
	// MaxRetries is how often a failed request is retried (default 3;
	// negative: never).
	MaxRetries int
	// Backoff is the wait before the first retry, doubled for each next one,
	// with up to 50% jitter (default 500 ms).
	Backoff time.Duration
	// Concurrency bounds the requests in flight (default 8).
	Concurrency int
	// HTTPClient sends the requests (default: a client of its own).
	HTTPClient *http.Client
	// MaxResponseBytes refuses an answer larger than this, with an error
	// that says so (DefaultMaxResponseBytes when zero).
	MaxResponseBytes int64
}

// DefaultMaxResponseBytes is the largest answer a client reads by default.
const DefaultMaxResponseBytes = 64 << 20

// Client sends chat-completions requests to one server and model.
type Client struct {
	base             string
	shown            string // base with its password redacted, for messages
	maxBody          int64
	model, key       string
	timeout, backoff time.Duration
	retries          int
	sem              chan struct{}
	http             *http.Client
}

// NewClient checks cfg and returns a client for it.
func NewClient(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: server URL %q: want http(s)://HOST[:PORT][/PATH]", redact(cfg.URL))
	}
	if cfg.Model == "" {
		return nil, errors.New("openai: no model name: the server's name for the model is required")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1"
	}
	c := &Client{
		base: strings.TrimSuffix(u.String(), "/"), shown: strings.TrimSuffix(u.Redacted(), "/"), model: cfg.Model, key: cfg.APIKey,
		timeout: cfg.Timeout, backoff: cfg.Backoff, retries: cfg.MaxRetries, http: cfg.HTTPClient, maxBody: cfg.MaxResponseBytes,
	}
	if c.maxBody <= 0 {
		c.maxBody = DefaultMaxResponseBytes
	}
	if c.timeout <= 0 {
		c.timeout = 5 * time.Minute
	}
	if c.backoff <= 0 {
		c.backoff = 500 * time.Millisecond
	}
	switch {
	case c.retries == 0:
		c.retries = 3
	case c.retries < 0:
		c.retries = 0
	}
	n := cfg.Concurrency
	if n <= 0 {
		n = 8
	}
	c.sem = make(chan struct{}, n)
	if c.http == nil {
		c.http = &http.Client{}
	}
	return c, nil
}

// URL returns the API's base URL, a password in it redacted (xxxxx).
func (c *Client) URL() string { return c.shown }

// redact hides the password of a URL's user information in raw, which may
// not parse as a URL.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(authority[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// Model returns the served model's name.
func (c *Client) Model() string { return c.model }

// Request is a chat-completions request. Model is filled in by the client.
type Request struct {
	Model       string            `json:"model"`
	Messages    []Message         `json:"messages"`
	Tools       []json.RawMessage `json:"tools,omitempty"`
	Temperature *float64          `json:"temperature,omitempty"`
	TopP        *float64          `json:"top_p,omitempty"`
	// TopK is not OpenAI's; vLLM, SGLang and llama.cpp's server take it.
	TopK      int      `json:"top_k,omitempty"`
	N         int      `json:"n,omitempty"`
	MaxTokens int      `json:"max_tokens,omitempty"`
	Seed      *int64   `json:"seed,omitempty"`
	Stop      []string `json:"stop,omitempty"`
}

// Message is a chat message in the API's form.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is a native tool call: the function's name and its arguments as
// a JSON text.
type ToolCall struct {
	ID       string   `json:"id,omitempty"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is a tool call's function.
type Function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// UnmarshalJSON reads a function whose arguments are a JSON text, as
// OpenAI's API writes them, or a JSON object, as some servers do (Ollama's
// native API, some proxies): an object is kept as its JSON text, so that
// one such call does not fail the whole reply.
func (f *Function) UnmarshalJSON(b []byte) error {
	var v struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	f.Name, f.Arguments = v.Name, ""
	args := bytes.TrimSpace(v.Arguments)
	switch {
	case len(args) == 0 || string(args) == "null":
	case args[0] == '"':
		if err := json.Unmarshal(args, &f.Arguments); err != nil {
			return err
		}
	default:
		f.Arguments = string(args) // an object (or another JSON value the tool will refuse)
	}
	return nil
}

// Response is a chat-completions response.
type Response struct {
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Choice is one sampled reply.
type Choice struct {
	Index int `json:"index"`
	// Message is nil when the server sent none (or null): not an empty
	// answer, an error.
	Message *ReplyMessage `json:"message"`
	// FinishReason is "stop", "length", "tool_calls" or "content_filter".
	FinishReason string `json:"finish_reason"`
}

// ReplyMessage is a choice's message.
type ReplyMessage struct {
	Content   *string    `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls"`
}

// Usage counts a request's tokens in the server's tokenizer.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// APIError is a server's error answer, or an answer the client refuses.
type APIError struct {
	Status  int
	Message string
	tooBig  bool // an answer over the client's size limit
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

// temporary reports whether a retry may succeed.
func (e *APIError) temporary() bool {
	if e.tooBig {
		return false
	}
	return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// Complete sends req (its Model set to the client's) and returns the
// server's response, retrying transport failures, timeouts, 408, 429 and
// 5xx answers with exponential backoff. The error names the last failure
// and how many attempts were made.
func (c *Client) Complete(ctx context.Context, req *Request) (*Response, error) {
	r := *req
	r.Model = c.model
	body, err := json.Marshal(&r)
	if err != nil {
		return nil, fmt.Errorf("openai: encode request: %w", err)
	}
	var last error
	for attempt := 0; ; attempt++ {
		resp, wait, err := c.once(ctx, body)
		if err == nil {
			return resp, nil
		}
		last = err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ae *APIError
		if errors.As(err, &ae) && !ae.temporary() {
			return nil, err
		}
		if attempt >= c.retries {
			break
		}
		if wait <= 0 {
			wait = c.backoff << attempt
			wait += time.Duration(rand.Int64N(int64(wait)/2 + 1))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	return nil, fmt.Errorf("%w (after %d attempts)", last, c.retries+1)
}

// once sends one request. wait is the server's Retry-After, if it gave one.
func (c *Client) once(ctx context.Context, body []byte) (_ *Response, wait time.Duration, _ error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	defer func() { <-c.sem }()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("openai: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		hr.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := c.http.Do(hr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, 0, fmt.Errorf("POST %s/chat/completions: no answer within %v", c.shown, c.timeout)
		}
		return nil, 0, fmt.Errorf("POST %s/chat/completions: %w", c.shown, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, c.maxBody+1))
	if err != nil {
		return nil, 0, fmt.Errorf("POST %s/chat/completions: read answer: %w", c.shown, err)
	}
	if int64(len(b)) > c.maxBody {
		// Not retried: the server would answer as much again.
		return nil, 0, &APIError{Status: res.StatusCode, Message: fmt.Sprintf("the answer is larger than %d bytes (the client's limit): refused unread", c.maxBody), tooBig: true}
	}
	if res.StatusCode != http.StatusOK {
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = time.Duration(min(s, 120)) * time.Second
		}
		return nil, wait, &APIError{Status: res.StatusCode, Message: errorMessage(b)}
	}
	var out Response
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, 0, fmt.Errorf("POST %s/chat/completions: answer is not a chat completion: %w: %s", c.shown, err, clip(b))
	}
	if len(out.Choices) == 0 {
		// Some servers answer 200 with an error object.
		if m := errorMessage(b); m != "" {
			return nil, 0, &APIError{Status: http.StatusInternalServerError, Message: m}
		}
		return nil, 0, fmt.Errorf("POST %s/chat/completions: answer has no choices: %s", c.shown, clip(b))
	}
	return &out, 0, nil
}

// errorMessage extracts the message of an error body in the forms servers
// use: OpenAI's and vLLM's {"error": {"message": ...}}, Ollama's and
// llama.cpp's {"error": "..."}, FastAPI's {"detail": ...}; else the body.
func errorMessage(b []byte) string {
	var v struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(b, &v) == nil {
		for _, raw := range []json.RawMessage{v.Error, v.Detail} {
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			var s string
			if json.Unmarshal(raw, &s) == nil {
				return s
			}
			var o struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(raw, &o) == nil && o.Message != "" {
				return o.Message
			}
			return clip(raw)
		}
		return ""
	}
	return clip(b)
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return s
}

// Models lists the models the server's GET /models names (many servers
// list only some of what they serve: transformers serve lists its cache).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, min(c.timeout, 30*time.Second))
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/models", nil)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	if c.key != "" {
		hr.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := c.http.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("GET %s/models: %w", c.shown, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s/models: %w", c.shown, err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/models: %w", c.shown, &APIError{Status: res.StatusCode, Message: errorMessage(b)})
	}
	var v struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("GET %s/models: %w", c.shown, err)
	}
	names := make([]string, len(v.Data))
	for i, m := range v.Data {
		names[i] = m.ID
	}
	return names, nil
}

// Check probes the server before any work starts: one request with tools
// (the sampling settings of probe, max_tokens 1) must succeed. It fails
// with an error that says which of these it is: the server cannot be
// reached, it does not serve the model (naming what its /models lists), or
// it refuses tools (no tool-call support), or it refused the request for
// another reason (an unsupported setting).
func (c *Client) Check(ctx context.Context, tools []json.RawMessage, probe Request) error {
	if len(tools) == 0 {
		tools = []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"ping","description":"Answer pong.","parameters":{"type":"object","properties":{}}}}`)}
	}
	probe.Messages = []Message{{Role: "user", Content: "Say OK."}}
	probe.Tools = tools
	probe.MaxTokens = 1
	probe.N = 0
	cc := *c
	cc.retries = 0
	_, err := cc.Complete(ctx, &probe)
	if err == nil {
		return nil
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cannot reach the chat-completions server at %s: %w", c.shown, err)
	}
	msg := strings.ToLower(ae.Message)
	switch {
	case ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden:
		return fmt.Errorf("the server at %s refused the API key: %w", c.shown, err)
	case ae.Status == http.StatusNotFound && !strings.Contains(msg, "model"):
		return fmt.Errorf("%s/chat/completions not found: is %s an OpenAI-compatible API base URL (often ending in /v1)? %w", c.shown, c.shown, err)
	case strings.Contains(msg, "tool"):
		return fmt.Errorf("the server at %s does not accept tool calls for model %q (start it with tool calling enabled, e.g. vLLM's --enable-auto-tool-choice --tool-call-parser, llama.cpp's --jinja): %w", c.shown, c.model, err)
	case strings.Contains(msg, strings.ToLower(c.model)) || strings.Contains(msg, "model") || ae.Status == http.StatusNotFound:
		listed := ""
		if names, lerr := c.Models(ctx); lerr == nil && len(names) > 0 {
			listed = fmt.Sprintf(" (its /models lists: %s)", strings.Join(names, ", "))
		}
		return fmt.Errorf("the server at %s does not serve model %q%s: %w", c.shown, c.model, listed, err)
	}
	return fmt.Errorf("the server at %s refused a test request for model %q with tools: %w", c.shown, c.model, err)
}
