package eval

import (
	"context"
	"io"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/toolcall"
)

// PolicyOf is what eval and tasks distill sample: the served model s names when it is given, opened and
// probed with the tools of ws's first fixture and cfg's sampling settings (openai.Served.Open, noting the
// server to log), else ws's model with cfg's cache size (Sampled).
func PolicyOf(ctx context.Context, s *openai.Served, ws *inputs.Loaded, cfg Config, log io.Writer) (PolicyFor, error) {
	if !s.Given() {
		return Sampled(ws.Model, cfg), nil
	}
	p, err := s.Open(ctx, ws.Tokenizer, toolcall.FunctionSchemas(sandbox.FirstTools(ws.Sandboxes)), cfg.Sample, log)
	if err != nil {
		return nil, err
	}
	return Fixed(p), nil
}
