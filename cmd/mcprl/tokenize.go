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
		Long:  help("tokenize"),
		Args:  cobra.NoArgs,
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
