package main

import (
	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/tokenizer"
)

func newTokenizeCmd() *cobra.Command {
	var dir string
	var decode bool
	cmd := &cobra.Command{
		Use:   "tokenize --tokenizer DIR [--decode]",
		Short: `Encode JSONL {"text": ...} lines from stdin into {"ids": [...]} lines (or the reverse with --decode)`,
		Long: `tokenize reads one JSON object per line from stdin and writes one per line to stdout, in order.
Encoding: {"text": "..."} -> {"ids": [...]}, exactly as the Hugging Face tokenizer of DIR encodes the text
(added and special tokens such as <|im_start|> in the text become their single ids; no BOS/EOS added).
With --decode: {"ids": [...]} -> {"text": "..."} (special tokens kept; invalid UTF-8 becomes U+FFFD).
A chat: {"messages": [...], "tools": [...], "add_generation_prompt": true} -> {"text": "...", "ids": [...]},
the tokenizer's chat template rendered (messages as in task files: tool_calls are {"name", "arguments"}) and
encoded, what transformers' apply_chat_template(messages, tools=..., add_generation_prompt=...) gives.
Other fields of the input lines are ignored. Empty lines are skipped.

Example:
  echo '{"text": "<|im_start|>user\nhi<|im_end|>"}' | mcprl tokenize --tokenizer tokenizer/testdata/qwen2.5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := tokenizer.Load(dir)
			if err != nil {
				return err
			}
			return t.ConvertJSONL(cmd.InOrStdin(), "stdin", cmd.OutOrStdout(), decode)
		},
	}
	cmd.Flags().StringVar(&dir, "tokenizer", "", "Hugging Face tokenizer directory (tokenizer.json, tokenizer_config.json)")
	cmd.Flags().BoolVar(&decode, "decode", false, `decode {"ids"} lines into {"text"} lines instead of encoding`)
	_ = cmd.MarkFlagRequired("tokenizer")
	return cmd
}
