package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/completion"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/tokenizer"
)

func newGenerateCmd() *cobra.Command {
	var modelDir, prompt, tasksPath, fixtures, dsn, out string
	var greedy, logprobs, asChat bool
	var maxNew, topK, batch int
	var temperature, topP float64
	var seed uint64
	cmd := &cobra.Command{
		Use:   "generate --model DIR (--prompt TEXT | --tasks FILE --fixtures DIR) [--greedy] [--logprobs] [--max-new-tokens N]",
		Short: "Sample completions of a prompt or of each task's prompt and write them as JSONL",
		Long: `generate samples from the model in DIR with its KV cache and writes one JSON object per prompt:
{"id", "prompt", "prompt_ids", "text", "ids", "logprobs", "finish_reason"}: the prompt as text and token ids,
the completion as text and token ids (a stop token included), with --logprobs each sampled token's log-prob
log softmax(logits / temperature)[token] over the whole vocabulary (temperature 1 when --greedy: what
mcprl model forward's token_logprobs give for the same tokens), and why it stopped ("stop" or "length").

--prompt TEXT is encoded as it is (special tokens such as <|im_start|> in it become their ids); with --chat it
is the user's message, rendered with the model's chat template. --tasks FILE renders each task's prompt as a
rollout does (its system prompt, or the chat template's tool section from the fixture's tools) and stops at
</tool_call> as well as at the end-of-turn tokens: the first turn of a trajectory. Prompts are sampled in
batches of --batch-size; sequence i of a batch draws from its own stream of --seed.

Examples:
  mcprl generate --model runs/grpo/final --prompt 'SELECT' --greedy --logprobs --max-new-tokens 16
  mcprl generate --model runs/grpo/final --tasks examples/customers/quick_tasks.jsonl --fixtures examples/fixtures --out gen.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (prompt == "") == (tasksPath == "") {
				return errors.New("give one of --prompt TEXT and --tasks FILE")
			}
			if maxNew < 1 || batch < 1 {
				return fmt.Errorf("--max-new-tokens %d and --batch-size %d: want at least 1", maxNew, batch)
			}
			var m *model.Model
			var tok *tokenizer.Tokenizer
			var records []completion.Record
			var extraStops []string
			if prompt != "" {
				var err error
				if m, err = loadModel(cmd, modelDir); err != nil {
					return err
				}
				if tok, err = tokenizer.Load(modelDir); err != nil {
					return fmt.Errorf("model %s: %w", modelDir, err)
				}
				text := prompt
				if asChat {
					tpl, err := tok.Template()
					if err != nil {
						return err
					}
					if text, err = tpl.Render([]chat.Message{{Role: "user", Content: prompt}}, nil, true); err != nil {
						return err
					}
				}
				records = append(records, completion.Record{Prompt: text})
			} else {
				engine, err := engineOf(cmd, "")
				if err != nil {
					return err
				}
				w, err := load(cmd.Context(), engine, modelDir, tasksPath, fixtures, dsn, false, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer w.Close()
				m, tok = w.Model, w.Tokenizer
				if records, err = completion.TaskPrompts(w.Tasks, w.Sandboxes, w.Template, tasksPath); err != nil {
					return err
				}
				extraStops = []string{"</tool_call>"}
			}
			opts := completion.Options{BatchSize: batch, Seed: seed, LogProbs: logprobs, Sample: model.SampleOptions{
				Temperature: temperature, TopP: topP, TopK: topK, MaxNewTokens: maxNew, Stop: completion.StopIDs(m, tok, extraStops)}}
			if greedy {
				opts.Sample.Temperature = 0
			}
			w := io.Writer(cmd.OutOrStdout())
			if out != "" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			bw := bufio.NewWriter(w)
			enc := json.NewEncoder(bw)
			enc.SetEscapeHTML(false)
			err := completion.Generate(cmd.Context(), m, tok, records, opts, func(batch []completion.Record) error {
				for i := range batch {
					if err := enc.Encode(&batch[i]); err != nil {
						return err
					}
				}
				return bw.Flush()
			})
			if err != nil {
				return err
			}
			if out != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d completions to %s\n", len(records), out)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "Hugging Face model directory (Qwen2 or Llama, with its tokenizer)")
	fl.StringVar(&prompt, "prompt", "", "prompt text (encoded as it is; see --chat)")
	fl.BoolVar(&asChat, "chat", false, "render --prompt as the user's message with the model's chat template")
	fl.StringVar(&tasksPath, "tasks", "", "tasks JSONL file: one completion of each task's rendered prompt")
	fl.StringVar(&fixtures, "fixtures", "examples/fixtures", "directory of fixtures (the tools of tasks without a system prompt)")
	fl.StringVar(&dsn, "dsn", "", "PostgreSQL DSN for PostgreSQL fixtures")
	fl.StringVar(&out, "out", "", "JSONL file to write (default: stdout)")
	fl.BoolVar(&greedy, "greedy", false, "greedy decoding (temperature 0)")
	fl.BoolVar(&logprobs, "logprobs", false, "write each sampled token's log-prob")
	fl.IntVar(&maxNew, "max-new-tokens", 256, "tokens to sample per prompt at most")
	fl.Float64Var(&temperature, "temperature", 1, "sampling temperature")
	fl.Float64Var(&topP, "top-p", 1, "nucleus sampling: keep the most likely tokens up to this probability mass")
	fl.IntVar(&topK, "top-k", 0, "keep the K most likely tokens (0: all)")
	fl.Uint64Var(&seed, "seed", 0, "random seed of sampling")
	fl.IntVar(&batch, "batch-size", 16, "prompts sampled together in one batch")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}
