package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/completion"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/sampling"
)

func newGenerateCmd() *cobra.Command {
	var src completion.Source
	var out string
	var greedy, logprobs bool
	var batch int
	var sf *samplingFlags
	cmd := &cobra.Command{
		Use:   "generate --model DIR (--prompt TEXT | --tasks FILE --fixtures DIR) [--greedy] [--logprobs] [--max-new-tokens N]",
		Short: "Sample completions of a prompt or of each task's prompt and write them as JSONL",
		Long:  help("generate"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
		},
	}
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
	_ = cmd.MarkFlagRequired("model")
	return cmd
}
