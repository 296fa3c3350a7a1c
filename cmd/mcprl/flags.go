package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/train"
)

// runFlags are the shared command-line shapes of train, sft, eval and tasks
// distill.
type runFlags struct {
	config                  string
	over                    train.Overrides // --model, --tasks, --fixtures, --dsn, --output-dir, --max-steps, --bf16
	skipBadTasks, overwrite bool
}

// register registers the flags of a training run (train, sft).
func (f *runFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "YAML config with TRL GRPOConfig/TrainingArguments names (required)")
	f.registerInputs(fl, "HF-format model directory with tokenizer files (overrides the config's model)")
	fl.StringVar(&f.over.OutputDir, "output-dir", "", "where checkpoints, metrics.jsonl and final/ go (overrides output_dir)")
	fl.IntVar(&f.over.MaxSteps, "max-steps", 0, "optimizer steps to run (overrides max_steps when > 0)")
	fl.BoolVar(&f.over.BF16, "bf16", false, "run the model in bfloat16: frozen weights stored in bfloat16, the linear layers' matmuls on bfloat16 inputs (engine xla; turns the config's bf16 on)")
	fl.BoolVar(&f.overwrite, "overwrite_output_dir", false, "start over in an output dir that holds an earlier run's checkpoints, final/ and metrics.jsonl (they are deleted); TRL's name")
}

// registerInputs registers the inputs of a command that runs tasks:
// --model (described by modelUsage), --tasks, --fixtures, --dsn and
// --skip-bad-tasks.
func (f *runFlags) registerInputs(fl *pflag.FlagSet, modelUsage string) {
	fl.StringVar(&f.over.Model, "model", "", modelUsage)
	fl.StringVar(&f.over.Tasks, "tasks", "", "tasks JSONL file (with --config: instead of the config's tasks)")
	fl.StringVar(&f.over.Fixtures, "fixtures", "", "directory of fixtures, each named by a task's \"fixture\" (with --config: instead of the config's fixtures)")
	fl.StringVar(&f.over.DSN, "dsn", "", "PostgreSQL DSN for the sandboxes' databases (default: the config's dsn with --config, else embedded SQLite)")
	fl.BoolVar(&f.skipBadTasks, "skip-bad-tasks", false, "skip bad lines of the tasks file (listed and counted; train and sft also write them to skipped_tasks.txt in the output dir) instead of failing")
}

// engineFlag is --engine: what runs the model (model.Engine). It is registered once, by addEngineFlag, as a
// persistent flag of the commands that run a model; it overrides a config's `engine`.
const engineFlag = "engine"

// addEngineFlag registers --engine on each command that runs a model, for it and its subcommands.
func addEngineFlag(cmds ...*cobra.Command) {
	for _, c := range cmds {
		c.PersistentFlags().String(engineFlag, "", "what runs the model: "+model.Engines+
			" (default: the config's engine, else auto: XLA where its plugin is installed (scripts/install-xla.sh), else simplego)")
	}
}

// engineOf is the engine a command runs on: --engine when given, else the config's setting (configured; ""
// is auto).
func engineOf(cmd *cobra.Command, configured model.Engine) (model.Engine, error) {
	s := string(configured)
	if f := cmd.Flag(engineFlag); f != nil && f.Changed {
		s = f.Value.String()
	}
	e, err := model.ParseEngine(s)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", engineFlag, err)
	}
	return e, nil
}

// openEngine opens the engine of --engine (else configured) and writes its engine line to w.
func openEngine(cmd *cobra.Command, configured model.Engine, w io.Writer) (*model.EngineBackend, error) {
	e, err := engineOf(cmd, configured)
	if err != nil {
		return nil, err
	}
	return inputs.OpenEngine(e, w)
}

// samplingFlags are the flags of sampling.Settings and the seed, registered
// once for every command that samples a model (chat, generate, eval, tasks
// distill), each with its own defaults.
type samplingFlags struct {
	fl         *pflag.FlagSet
	def, v     sampling.Settings // the command's defaults; the flags' values
	iters      int               // v's MaxToolCallingIterations
	seed       int64
	lengthFlag string // --max-completion-length, or generate's --max-new-tokens
	// Resolved, after settings: what the command samples with.
	Settings sampling.Settings
}

// registerSampling registers --temperature, --top-p, --top-k and --seed
// and, for a command that runs tools (rollouts), --max-prompt-length,
// --max-completion-length and --max-tool-calling-iterations, else
// --max-new-tokens, with def as their defaults.
func registerSampling(fl *pflag.FlagSet, def sampling.Settings, seed int64, rollouts bool) *samplingFlags {
	f := &samplingFlags{fl: fl, def: def, lengthFlag: "max-new-tokens"}
	f.v.MaxToolCallingIterations = &f.iters
	fl.Float64Var(&f.v.Temperature, "temperature", def.Temperature, "sampling temperature, 0: greedy (this and the other sampling flags default to a trained model's own settings)")
	fl.Float64Var(&f.v.TopP, "top-p", def.TopP, "nucleus sampling: keep the most likely tokens up to this probability mass")
	fl.IntVar(&f.v.TopK, "top-k", def.TopK, "keep the K most likely tokens (0: all)")
	fl.Int64Var(&f.seed, "seed", seed, "sampling seed")
	if rollouts {
		f.lengthFlag = "max-completion-length"
		fl.IntVar(&f.v.MaxPromptLength, "max-prompt-length", def.MaxPromptLength, "prompt tokens kept, from the left (0: all)")
		fl.IntVar(&f.v.MaxCompletionLength, f.lengthFlag, def.MaxCompletionLength, "sampled plus tool-output tokens per trajectory")
		fl.IntVar(&f.iters, "max-tool-calling-iterations", def.Iterations(sampling.DefaultIterations), "rounds of tool execution per trajectory")
	} else {
		fl.IntVar(&f.v.MaxCompletionLength, f.lengthFlag, def.MaxCompletionLength, "tokens to sample per prompt at most")
	}
	return f
}

// registerSystemPrompt registers --system-prompt (for chat and generate
// --chat, whose prompts have none of their own).
func (f *samplingFlags) registerSystemPrompt(usage string) {
	f.fl.StringVar(&f.v.SystemPrompt, "system-prompt", "", usage)
}

// resolve sets Settings: sampling.Resolve of the command's defaults, base
// (a config's settings), modelDir's trained ones and the flags given. It
// returns the trainer_state.json the trained settings came from ("" if
// none).
func (f *samplingFlags) resolve(base *sampling.Settings, modelDir string) (from string, err error) {
	var given []string
	for name, key := range map[string]string{
		"temperature":                 "temperature",
		"top-p":                       "top_p",
		"top-k":                       "top_k",
		"max-prompt-length":           "max_prompt_length",
		f.lengthFlag:                  "max_completion_length",
		"max-tool-calling-iterations": "max_tool_calling_iterations",
		"system-prompt":               "system_prompt",
	} {
		if f.fl.Lookup(name) != nil && f.fl.Changed(name) {
			given = append(given, key)
		}
	}
	f.Settings, from, err = sampling.Resolve(f.def, base, modelDir, sampling.Given(f.v, given...))
	return from, err
}

// print writes which settings the command samples with, and where they
// came from, as "NAME: ..." lines.
func (f *samplingFlags) print(w io.Writer, name, from string) {
	if from != "" {
		fmt.Fprintf(w, "%s: generation settings from %s (as trained; flags override)\n", name, from)
	}
	s := &f.Settings
	if f.lengthFlag == "max-new-tokens" {
		fmt.Fprintf(w, "%s: temperature %g, top_p %g, top_k %d, max_new_tokens %d\n", name, s.Temperature, s.TopP, s.TopK, s.MaxCompletionLength)
		return
	}
	fmt.Fprintf(w, "%s: %s\n", name, s)
}

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
