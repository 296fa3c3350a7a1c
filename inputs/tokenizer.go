package inputs

import (
	"context"
	"fmt"

	"github.com/mcprl/mcprl/tokenizer"
)

// LoadTasksWith is LoadTasks rendering with the tokenizer and chat
// template of tokenizerDir ("": the embedded small one, whose chat template
// is Qwen2.5's): the inputs of a run without a model of its own, such as a
// served policy's (its --tokenizer) or a golden replay's.
func LoadTasksWith(ctx context.Context, tokenizerDir string, o Options) (*Loaded, error) {
	if err := o.missing(false); err != nil {
		return nil, err
	}
	tok, tpl, err := tokenizer.LoadWithTemplate(tokenizerDir)
	if err != nil {
		return nil, fmt.Errorf("inputs: tokenizer: %w", err)
	}
	return LoadTasks(ctx, tok, tpl, o)
}
