package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/mcprl/mcprl/sampling"
)

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
