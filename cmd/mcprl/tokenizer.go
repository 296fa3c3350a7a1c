package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/tokenizer"
)

// newTokenizerCmd groups tokenizer maintenance commands.
func newTokenizerCmd() *cobra.Command {
	return command("tokenizer", nil, newTokenizerReduceCmd())
}

func newTokenizerReduceCmd() *cobra.Command {
	var dir, out string
	var merges, size int
	cmd := command("tokenizer-reduce", func(cmd *cobra.Command, _ []string) error {
		if (merges < 0) == (size < 0) {
			return fmt.Errorf("give exactly one of --vocab (merges to keep) and --size (total ids)")
		}
		t, err := tokenizer.Load(dir)
		if err != nil {
			return err
		}
		var r *tokenizer.Tokenizer
		if size >= 0 {
			if r, err = t.ReduceTo(size); err != nil {
				return fmt.Errorf("--size: %w", err)
			}
		} else {
			r, err = t.Reduce(merges)
		}
		if err != nil {
			return err
		}
		if err := r.Save(out); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d ids (256 bytes + %d merges + %d added tokens; was %d ids)\n",
			out, r.VocabSize(), r.NumMerges(), len(r.AddedTokens()), t.VocabSize())
		return nil
	})
	cmd.Flags().StringVar(&dir, "tokenizer", "", "Hugging Face tokenizer directory to reduce (tokenizer.json, tokenizer_config.json)")
	cmd.Flags().IntVar(&merges, "vocab", -1, "number K of BPE merges to keep (ids = 256 + K + added tokens)")
	cmd.Flags().IntVar(&size, "size", -1, "total number of ids wanted, added tokens included (sets K = size - 256 - added)")
	cmd.Flags().StringVar(&out, "out", "", "output directory (created; its tokenizer.json and tokenizer_config.json are overwritten)")
	required(cmd, "tokenizer", "out")
	return cmd
}

func newTokenizeCmd() *cobra.Command {
	var dir string
	var decode bool
	cmd := command("tokenize", func(cmd *cobra.Command, _ []string) error {
		t, err := tokenizer.Load(dir)
		if err != nil {
			return err
		}
		return t.ConvertJSONL(cmd.InOrStdin(), "stdin", cmd.OutOrStdout(), decode)
	})
	cmd.Flags().StringVar(&dir, "tokenizer", "", "Hugging Face tokenizer directory (tokenizer.json, tokenizer_config.json)")
	cmd.Flags().BoolVar(&decode, "decode", false, `decode {"ids"} lines into {"text"} lines instead of encoding`)
	required(cmd, "tokenizer")
	return cmd
}
