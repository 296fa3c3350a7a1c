package completion

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/tokenizer"
)

// WriteJSONL samples the records as Generate does and writes each as one
// JSON line to w (without HTML escaping), a batch at a time as soon as it
// is sampled: mcprl generate's output.
func WriteJSONL(ctx context.Context, w io.Writer, m *model.Model, tok *tokenizer.Tokenizer, records []Record, o Options) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return Generate(ctx, m, tok, records, o, func(batch []Record) error {
		for i := range batch {
			if err := enc.Encode(&batch[i]); err != nil {
				return fmt.Errorf("completion: %w", err)
			}
		}
		return bw.Flush()
	})
}
