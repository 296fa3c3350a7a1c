package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
	"github.com/mcprl/mcprl/train"
)

// servedFlags name a model served behind an OpenAI-compatible
// chat-completions API (eval, tasks distill, chat).
type servedFlags struct {
	url, model, keyEnv, tokenizer, tools string
	concurrency, retries                 int
	timeout                              time.Duration
}

func (f *servedFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.url, "policy", "", "sample from a model served behind an OpenAI-compatible chat-completions API at this base URL (vLLM, SGLang, Ollama, llama.cpp, transformers serve; e.g. http://localhost:8000/v1)")
	fl.StringVar(&f.model, "served-model", "", "with --policy: the server's name for the model")
	fl.StringVar(&f.keyEnv, "api-key-env", "", "with --policy: environment variable holding the API key (sent as a bearer token)")
	fl.StringVar(&f.tokenizer, "tokenizer", "", "with --policy: tokenizer directory (the served model's, for exact token budgets; default: the embedded small Qwen2.5 tokenizer)")
	fl.StringVar(&f.tools, "send-tools", "always", `with --policy: "always" sends the sandbox's tools with every request (servers need them to parse tool calls natively); "as-prompted" only where mcprl's own prompt shows them through the chat template (tasks without a system prompt), so the served model sees the prompt --model would`)
	fl.IntVar(&f.concurrency, "concurrency", 8, "with --policy: requests in flight at most")
	fl.IntVar(&f.retries, "max-retries", 3, "with --policy: retries of a failed request (transport errors, 408, 429, 5xx), with exponential backoff")
	fl.DurationVar(&f.timeout, "request-timeout", 5*time.Minute, "with --policy: time limit of one request")
}

// given reports whether --policy was given.
func (f *servedFlags) given() bool { return f.url != "" }

// client builds the API client the flags describe.
func (f *servedFlags) client() (*openai.Client, error) {
	if f.model == "" {
		return nil, errors.New("--policy needs --served-model, the server's name for the model")
	}
	cfg := openai.Config{URL: f.url, Model: f.model, Timeout: f.timeout, Concurrency: f.concurrency, MaxRetries: f.retries}
	if f.retries == 0 {
		cfg.MaxRetries = -1
	}
	if f.keyEnv != "" {
		cfg.APIKey = os.Getenv(f.keyEnv)
		if cfg.APIKey == "" {
			return nil, fmt.Errorf("--api-key-env %s: the environment variable is empty or unset", f.keyEnv)
		}
	}
	return openai.NewClient(cfg)
}

// policy builds the served policy and probes the server with the tools of
// the fixtures and the sampling settings, so that an unreachable server, a
// model it does not serve or a refused setting fails before any work.
func (f *servedFlags) policy(ctx context.Context, tok *tokenizer.Tokenizer, factories map[string]*sandbox.Factory, opts policy.SampleOptions, log io.Writer) (*openai.Policy, error) {
	c, err := f.client()
	if err != nil {
		return nil, err
	}
	p := &openai.Policy{Client: c, Tokenizer: tok}
	switch f.tools {
	case "always":
	case "as-prompted":
		p.ToolsAsPrompted = true
	default:
		return nil, fmt.Errorf("--send-tools %q: want always or as-prompted", f.tools)
	}
	if err := p.Check(ctx, toolcall.FunctionSchemas(sandbox.FirstTools(factories)), opts); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "policy: model %q at %s\n", c.Model(), c.URL())
	return p, nil
}

// load loads in for the policy the flags name: for a served one (or
// without a model, tasksOnly) the tasks with --tokenizer's tokenizer; else
// the model too, on the engine of --engine (else in.Engine).
func (f *servedFlags) load(cmd *cobra.Command, in train.Inputs, tasksOnly, skipBad bool) (*inputs.Loaded, error) {
	if f.given() || tasksOnly {
		return loadTasks(cmd.Context(), f.tokenizer, in, skipBad, cmd.ErrOrStderr())
	}
	engine, err := engineOf(cmd, in.Engine)
	if err != nil {
		return nil, err
	}
	in.Engine = engine
	return load(cmd.Context(), in, skipBad, cmd.ErrOrStderr())
}

// policyFor is what eval and tasks distill sample: the served policy,
// probed, or ws's model with cfg's cache size.
func (f *servedFlags) policyFor(ctx context.Context, ws *inputs.Loaded, cfg eval.Config, log io.Writer) (eval.PolicyFor, error) {
	if !f.given() {
		return eval.Sampled(ws.Model, cfg), nil
	}
	p, err := f.policy(ctx, ws.Tokenizer, ws.Sandboxes, cfg.Sample, log)
	if err != nil {
		return nil, err
	}
	return eval.Fixed(p), nil
}
