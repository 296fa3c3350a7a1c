package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/agent"
	"github.com/mcprl/mcprl/completion"
	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/sampling"
)

func newGenerateCmd() *cobra.Command {
	var src completion.Source
	var out string
	var greedy, logprobs bool
	var batch int
	var sf *samplingFlags
	cmd := command("generate", func(cmd *cobra.Command, _ []string) error {
		if (src.Prompt == "") == (src.Tasks == "") {
			return errors.New("give one of --prompt TEXT and --tasks FILE")
		}
		if cmd.Flags().Changed("system-prompt") && !src.Chat {
			return errors.New("--system-prompt needs --chat (a task has its own)")
		}
		from, err := sf.resolve(nil, src.ModelDir)
		if err != nil {
			return err
		}
		gs := &sf.Settings
		if greedy {
			gs.Temperature = 0
		}
		if gs.MaxCompletionLength < 1 || batch < 1 {
			return fmt.Errorf("--max-new-tokens %d and --batch-size %d: want at least 1", gs.MaxCompletionLength, batch)
		}
		src.SystemPrompt = gs.SystemPrompt
		if src.Engine, err = engineOf(cmd, ""); err != nil {
			return err
		}
		job, err := completion.Open(cmd.Context(), src, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		defer job.Close()
		sf.print(cmd.ErrOrStderr(), "generate", from)
		w := io.Writer(cmd.OutOrStdout())
		if out != "" {
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			defer f.Close()
			w = f
		}
		opts := completion.Options{BatchSize: batch, Seed: uint64(sf.seed), LogProbs: logprobs, Sample: model.SampleOptions{
			Temperature: gs.Temperature, TopP: gs.TopP, TopK: gs.TopK, MaxNewTokens: gs.MaxCompletionLength}}
		if err := job.Write(cmd.Context(), w, opts); err != nil {
			return err
		}
		if out != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d completions to %s\n", len(job.Records), out)
		}
		return nil
	})
	fl := cmd.Flags()
	fl.StringVar(&src.ModelDir, "model", "", "Hugging Face model directory (Qwen2 or Llama, with its tokenizer)")
	fl.StringVar(&src.Prompt, "prompt", "", "prompt text (encoded as it is; see --chat)")
	fl.BoolVar(&src.Chat, "chat", false, "render --prompt as the user's message with the model's chat template")
	fl.StringVar(&src.Tasks, "tasks", "", "tasks JSONL file: one completion of each task's rendered prompt")
	fl.StringVar(&src.Fixtures, "fixtures", "examples/fixtures", "directory of fixtures (the tools of tasks without a system prompt)")
	fl.StringVar(&src.DSN, "dsn", "", "PostgreSQL DSN for PostgreSQL fixtures")
	fl.StringVar(&out, "out", "", "JSONL file to write (default: stdout)")
	fl.BoolVar(&greedy, "greedy", false, "greedy decoding (temperature 0)")
	fl.BoolVar(&logprobs, "logprobs", false, "write each sampled token's log-prob")
	sf = registerSampling(fl, sampling.Settings{Temperature: 1, TopP: 1, MaxCompletionLength: 256}, 0, false)
	sf.registerSystemPrompt("with --chat, the system message (default: the one the model was trained with, else none)")
	fl.IntVar(&batch, "batch-size", 16, "prompts sampled together in one batch")
	required(cmd, "model")
	return cmd
}

func newChatCmd() *cobra.Command {
	var (
		served                 openai.Served
		modelDir, fixture, dsn string
		catalog                bool
		sf                     *samplingFlags
	)
	cmd := command("chat", func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		stderr, stdout := cmd.ErrOrStderr(), cmd.OutOrStdout()
		if served.Given() == (modelDir != "") {
			return errors.New("give one policy: --model DIR or --policy URL --served-model NAME")
		}
		if catalog && cmd.Flags().Changed("system-prompt") {
			return errors.New("give --catalog or --system-prompt, not both")
		}
		from, err := sf.resolve(nil, modelDir)
		if err != nil {
			return err
		}
		st := &sf.Settings
		a, err := agent.Open(ctx, fixture, dsn, catalog, st.SystemPrompt)
		if err != nil {
			return err
		}
		defer a.Close()
		ecfg := eval.ConfigOf(st, sf.seed)
		ecfg.Samples = 1
		var m *model.Model
		if !served.Given() {
			if m, err = loadModel(cmd, modelDir); err != nil {
				return err
			}
		}
		if a.Runner, err = eval.Runner(ctx, &served, m, modelDir, a.Sandbox, ecfg, stderr); err != nil {
			return err
		}
		a.Intro(stderr, "chat")
		sf.print(stderr, "chat", from)
		a.ShowSystemPrompt(stderr, "chat", !catalog && from != "" && !cmd.Flags().Changed("system-prompt"))
		return a.Converse(ctx, cmd.InOrStdin(), stdout, stderr)
	})
	fl := cmd.Flags()
	registerServed(fl, &served)
	fl.StringVar(&modelDir, "model", "", "HF-format model directory (an in-process policy)")
	fl.StringVar(&fixture, "fixture", "", "fixture directory (schema.sql, data.sql, workspace/, sandbox.yaml)")
	fl.StringVar(&dsn, "dsn", "", "PostgreSQL DSN for the sandbox's database (default: embedded SQLite)")
	fl.BoolVar(&catalog, "catalog", false, "system prompt: the tool catalog in the user's task format (as examples/customers was trained with)")
	sf = registerSampling(fl, sampling.Settings{TopP: 1, MaxCompletionLength: 1024}, 42, true)
	sf.registerSystemPrompt("system prompt (default: the one the model was trained with, else none: the chat template's tool section shows the tools)")
	required(cmd, "fixture")
	return cmd
}
