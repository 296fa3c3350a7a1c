// Package openai samples a rollout's turns from a model served behind an
// OpenAI-compatible chat-completions API: vLLM, SGLang, Ollama, llama.cpp's
// server, `transformers serve` or a hosted endpoint.
//
// Client speaks the API: one POST /chat/completions per request, with
// retries and exponential backoff on transport failures, 408, 429 and 5xx
// answers (honouring Retry-After), a per-request timeout, and a bound on
// the requests in flight. Client.Check probes a server before any work
// starts, so that an unreachable server, a model name it does not serve or
// a server without tool calling is a clear error up front.
//
// Policy implements policy.Policy over a Client: its batches are
// policy.Conversational, so the rollout gives each sequence its messages and
// the sandbox's tools, and every request sends them (tools in "tools").
// A reply's native tool calls are written back as the <tool_call> blocks of
// Qwen2.5's chat template (toolcall.RenderCall), a reply in text form is
// kept as the model wrote it, and either is encoded with the rollout's
// tokenizer, so rollouts, rewards and metrics see a served model exactly as
// they see the in-process one. A request that fails after its retries ends
// that one trajectory with the reason (policy.Sample.Err), never a reward.
package openai
