package main

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/train"
)

// registerServed registers the flags of a model served behind an
// OpenAI-compatible chat-completions API (eval, tasks distill, chat).
func registerServed(fl *pflag.FlagSet, s *openai.Served) {
	fl.StringVar(&s.URL, "policy", "", "sample from a model served behind an OpenAI-compatible chat-completions API at this base URL (vLLM, SGLang, Ollama, llama.cpp, transformers serve; e.g. http://localhost:8000/v1)")
	fl.StringVar(&s.Model, "served-model", "", "with --policy: the server's name for the model")
	fl.StringVar(&s.APIKeyEnv, "api-key-env", "", "with --policy: environment variable holding the API key (sent as a bearer token)")
	fl.StringVar(&s.TokenizerDir, "tokenizer", "", "with --policy: tokenizer directory (the served model's, for exact token budgets; default: the embedded small Qwen2.5 tokenizer)")
	fl.StringVar(&s.SendTools, "send-tools", "always", `with --policy: "always" sends the sandbox's tools with every request (servers need them to parse tool calls natively); "as-prompted" only where mcprl's own prompt shows them through the chat template (tasks without a system prompt), so the served model sees the prompt --model would`)
	fl.IntVar(&s.Concurrency, "concurrency", 8, "with --policy: requests in flight at most")
	fl.IntVar(&s.MaxRetries, "max-retries", 3, "with --policy: retries of a failed request (transport errors, 408, 429, 5xx), with exponential backoff")
	fl.DurationVar(&s.Timeout, "request-timeout", 5*time.Minute, "with --policy: time limit of one request")
}

// loadFor loads in for the policy: for a served one (or without a model,
// tasksOnly) the tasks with the served model's tokenizer; else the model
// too, on the engine of --engine (else in.Engine), which is checked either
// way.
func loadFor(cmd *cobra.Command, s *openai.Served, in train.Inputs, tasksOnly, skipBad bool) (*inputs.Loaded, error) {
	var err error
	if in.Engine, err = engineOf(cmd, in.Engine); err != nil {
		return nil, err
	}
	o := inputs.Options{Inputs: in, SkipBad: skipBad, Warn: cmd.ErrOrStderr()}
	if s.Given() || tasksOnly {
		return inputs.LoadTasksWith(cmd.Context(), s.TokenizerDir, o)
	}
	return inputs.Load(cmd.Context(), o)
}
