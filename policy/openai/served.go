package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/tokenizer"
)

// Served names a model served behind an OpenAI-compatible chat-completions API as the commands that sample one
// take it (mcprl eval, tasks distill and chat: --policy, --served-model, --api-key-env, --tokenizer,
// --send-tools, --concurrency, --max-retries, --request-timeout); Open makes it a probed Policy. Its errors
// name those flags.
type Served struct {
	URL   string // the API's base URL; "" names no served model
	Model string // the server's name for the model
	// APIKeyEnv names the environment variable holding the API key ("": none).
	APIKeyEnv string
	// TokenizerDir is the served model's tokenizer directory, for exact token budgets ("": the embedded small
	// one); the caller loads it.
	TokenizerDir string
	// SendTools is "always" (every request carries the sandbox's tools) or "as-prompted"
	// (Policy.ToolsAsPrompted).
	SendTools   string
	Concurrency int
	MaxRetries  int // 0: never retry
	Timeout     time.Duration
}

// Given reports whether s names a served model.
func (s *Served) Given() bool { return s.URL != "" }

// client builds the API client s describes.
func (s *Served) client() (*Client, error) {
	if s.Model == "" {
		return nil, errors.New("--policy needs --served-model, the server's name for the model")
	}
	cfg := Config{URL: s.URL, Model: s.Model, Timeout: s.Timeout, Concurrency: s.Concurrency, MaxRetries: s.MaxRetries}
	if s.MaxRetries == 0 {
		cfg.MaxRetries = -1
	}
	if s.APIKeyEnv != "" {
		if cfg.APIKey = os.Getenv(s.APIKeyEnv); cfg.APIKey == "" {
			return nil, fmt.Errorf("--api-key-env %s: the environment variable is empty or unset", s.APIKeyEnv)
		}
	}
	return NewClient(cfg)
}

// Open builds the served policy, encoding replies with tok, and probes the server with tools (the sandbox's
// function schemas) and opts' sampling settings (Policy.Check), so that an unreachable server, a model it does
// not serve or a refused setting fails before any work. It notes the model and server to log.
func (s *Served) Open(ctx context.Context, tok *tokenizer.Tokenizer, tools []json.RawMessage, opts policy.SampleOptions, log io.Writer) (*Policy, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	p := &Policy{Client: c, Tokenizer: tok}
	switch s.SendTools {
	case "always":
	case "as-prompted":
		p.ToolsAsPrompted = true
	default:
		return nil, fmt.Errorf("--send-tools %q: want always or as-prompted", s.SendTools)
	}
	if err := p.Check(ctx, tools, opts); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "policy: model %q at %s\n", c.Model(), c.URL())
	return p, nil
}
