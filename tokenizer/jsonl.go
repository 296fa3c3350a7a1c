package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/mcprl/mcprl/chat"
)

// ConvertJSONL reads one JSON object a line from in and writes one a line
// to out, in order, flushing whenever no further input is waiting (so a
// process on the other end of a pipe sees each answer at once):
//
//   - {"text": "..."} becomes {"ids": [...]}, Encode's ids (added and
//     special tokens in the text become their single ids; no BOS/EOS);
//   - with decode, {"ids": [...]} becomes {"text": "..."}, Decode's text;
//   - {"messages": [...], "tools": [...], "add_generation_prompt": b}
//     becomes {"text": "...", "ids": [...]}: the chat template rendered
//     (messages as task files hold them) and encoded, what transformers'
//     apply_chat_template gives.
//
// Other fields are ignored and blank lines skipped. A bad line ends the
// conversion with an error naming name and the line.
func (t *Tokenizer) ConvertJSONL(in io.Reader, name string, out io.Writer, decode bool) error {
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var tmpl *Template
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
				return fmt.Errorf("%s line %d: %w", name, line, jerr)
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
					return fmt.Errorf("%s line %d: %w", name, line, rerr)
				}
				if err := enc.Encode(struct {
					Text string `json:"text"`
					IDs  []int  `json:"ids"`
				}{text, append([]int{}, t.Encode(text)...)}); err != nil {
					return err
				}
			} else if decode {
				if rec.IDs == nil {
					return fmt.Errorf(`%s line %d: no "ids" field`, name, line)
				}
				if err := enc.Encode(struct {
					Text string `json:"text"`
				}{t.Decode(*rec.IDs)}); err != nil {
					return err
				}
			} else {
				if rec.Text == nil {
					return fmt.Errorf(`%s line %d: no "text" field`, name, line)
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
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}
