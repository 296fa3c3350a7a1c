package eval

import (
	"context"
	"io"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
)

// Open returns the Evaluator that eval and tasks distill run on ws's tasks
// with cfg, its progress to log. It samples the served model s names when
// it is given, opened and probed with the tools of ws's first fixture and
// cfg's sampling settings (openai.Served.Open, noting the server to log),
// else ws's model with cfg's cache size (Sampled).
func Open(ctx context.Context, s *openai.Served, ws *inputs.Loaded, cfg Config, log io.Writer) (*Evaluator, error) {
	if !s.Given() {
		return evaluatorOf(ws, Sampled(ws.Model, cfg), cfg, log), nil
	}
	p, err := s.Open(ctx, ws.Tokenizer, toolcall.FunctionSchemas(sandbox.FirstTools(ws.Sandboxes)), cfg.Sample, log)
	if err != nil {
		return nil, err
	}
	return evaluatorOf(ws, Fixed(p), cfg, log), nil
}

// OpenGolden returns the Evaluator that replays the golden trajectory of
// each of ws's tasks (Golden), with cfg sized to hold them (ForGolden;
// keepLength: the user chose the token budget), its progress to log.
func OpenGolden(ws *inputs.Loaded, cfg Config, keepLength bool, log io.Writer) (*Evaluator, error) {
	if err := cfg.ForGolden(ws.Tasks, keepLength); err != nil {
		return nil, err
	}
	return evaluatorOf(ws, Golden(ws.Tokenizer), cfg, log), nil
}

// evaluatorOf is the Evaluator of policy on ws's tasks and sandboxes.
func evaluatorOf(ws *inputs.Loaded, policy PolicyFor, cfg Config, log io.Writer) *Evaluator {
	return &Evaluator{Policy: policy, Tokenizer: ws.Tokenizer, Template: ws.Template, Sandboxes: ws.Sandboxes, Config: cfg, Progress: log}
}

// Runner returns the rollout runner of one conversation at a time (mcprl
// chat) with cfg's settings: of the served model s names when it is given,
// its tokenizer from s.TokenizerDir, opened and probed with sb's tools, else
// of m, whose tokenizer is in modelDir.
func Runner(ctx context.Context, s *openai.Served, m *model.Model, modelDir string, sb *sandbox.Factory, cfg Config, log io.Writer) (*rollout.Runner, error) {
	tokDir := modelDir
	if s.Given() {
		tokDir = s.TokenizerDir
	}
	tok, tpl, err := tokenizer.LoadWithTemplate(tokDir)
	if err != nil {
		return nil, err
	}
	var pol policy.Policy
	if s.Given() {
		pol, err = s.Open(ctx, tok, toolcall.FunctionSchemas(sb.Tools()), cfg.Sample, log)
	} else {
		pol, err = Sampled(m, cfg)(nil, 1)
	}
	if err != nil {
		return nil, err
	}
	return &rollout.Runner{Policy: pol, Tokenizer: tok, Template: tpl, Config: cfg.Rollout()}, nil
}
