package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/chat"
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
			return tokenizeStream(cmd.InOrStdin(), cmd.OutOrStdout(), t, decode)
		},
	}
	cmd.Flags().StringVar(&dir, "tokenizer", "", "Hugging Face tokenizer directory (tokenizer.json, tokenizer_config.json)")
	cmd.Flags().BoolVar(&decode, "decode", false, `decode {"ids"} lines into {"text"} lines instead of encoding`)
	_ = cmd.MarkFlagRequired("tokenizer")
	return cmd
}

// tokenizeStream converts JSONL in to JSONL out, line by line, in order.
func tokenizeStream(in io.Reader, out io.Writer, t *tokenizer.Tokenizer, decode bool) error {
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var tmpl *tokenizer.Template
	for line := 1; ; line++ {
		data, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(data)) > 0 {
			var rec struct {
				Text                *string           `json:"text"`
				IDs                 *[]int            `json:"ids"`
				Messages            []chat.Message    `json:"messages"`
				Tools               []json.RawMessage `json:"tools"`
				AddGenerationPrompt bool              `json:"add_generation_prompt"`
			}
			if jerr := json.Unmarshal(data, &rec); jerr != nil {
				return fmt.Errorf("stdin line %d: %w", line, jerr)
			}
			if rec.Messages != nil {
				if tmpl == nil {
					var terr error
					if tmpl, terr = t.Template(); terr != nil {
						return terr
					}
				}
				text, rerr := tmpl.Render(rec.Messages, rec.Tools, rec.AddGenerationPrompt)
				if rerr != nil {
					return fmt.Errorf("stdin line %d: %w", line, rerr)
				}
				if err := enc.Encode(struct {
					Text string `json:"text"`
					IDs  []int  `json:"ids"`
				}{text, append([]int{}, t.Encode(text)...)}); err != nil {
					return err
				}
			} else if decode {
				if rec.IDs == nil {
					return fmt.Errorf(`stdin line %d: no "ids" field`, line)
				}
				if err := enc.Encode(struct {
					Text string `json:"text"`
				}{t.Decode(*rec.IDs)}); err != nil {
					return err
				}
			} else {
				if rec.Text == nil {
					return fmt.Errorf(`stdin line %d: no "text" field`, line)
				}
				ids := t.Encode(*rec.Text)
				if ids == nil {
					ids = []int{}
				}
				if err := enc.Encode(struct {
					IDs []int `json:"ids"`
				}{ids}); err != nil {
					return err
				}
			}
		}
		if err == io.EOF {
			return w.Flush()
		}
		if r.Buffered() == 0 { // nothing more read yet: let a waiting reader see this line
			if ferr := w.Flush(); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
	}
}
