package completion

import (
	"context"
	"fmt"
	"io"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/train"
)

// Source is what mcprl generate completes: one text prompt (Prompt) or the first turn of every task in a tasks
// file (Tasks, with Fixtures and DSN for the tools of tasks without a system prompt), with the model in ModelDir
// on Engine.
type Source struct {
	ModelDir string
	Engine   model.Engine
	// Prompt is encoded as it is (special tokens in it become their ids); with Chat it is the user's message,
	// rendered with the model's chat template after SystemPrompt (ChatPrompt).
	Prompt       string
	Chat         bool
	SystemPrompt string
	Tasks        string
	Fixtures     string
	DSN          string
}

// Job is what Open loaded: the model and its tokenizer and the records to complete. Close frees the tasks'
// sandboxes.
type Job struct {
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	Records   []Record
	// Stops are the stop strings beyond StopIDs' end-of-turn ones: </tool_call> for task prompts, where a
	// trajectory's first turn ends at its first call.
	Stops []string
	close func() error
}

// Open loads s: the model on its engine (noting the engine line to warn) with its tokenizer, and the records,
// the prompt's or each task's (TaskPrompts, over the tasks' started sandboxes).
func Open(ctx context.Context, s Source, warn io.Writer) (*Job, error) {
	j := &Job{close: func() error { return nil }}
	if s.Tasks != "" {
		ws, err := inputs.Load(ctx, inputs.Options{Inputs: train.Inputs{Model: s.ModelDir, Tasks: s.Tasks, Fixtures: s.Fixtures, DSN: s.DSN, Engine: s.Engine}, Warn: warn})
		if err != nil {
			return nil, err
		}
		j.Model, j.Tokenizer, j.Stops, j.close = ws.Model, ws.Tokenizer, []string{"</tool_call>"}, ws.Close
		if j.Records, err = TaskPrompts(ws.Tasks, ws.Sandboxes, ws.Template, s.Tasks); err != nil {
			ws.Close()
			return nil, err
		}
		return j, nil
	}
	eng, err := inputs.OpenEngine(s.Engine, warn)
	if err != nil {
		return nil, err
	}
	if j.Model, err = model.Load(eng.Backend, s.ModelDir); err != nil {
		return nil, err
	}
	if j.Tokenizer, err = tokenizer.Load(s.ModelDir); err != nil {
		return nil, fmt.Errorf("model %s: %w", s.ModelDir, err)
	}
	text := s.Prompt
	if s.Chat {
		tpl, err := j.Tokenizer.Template()
		if err != nil {
			return nil, err
		}
		if text, err = ChatPrompt(tpl, s.SystemPrompt, s.Prompt); err != nil {
			return nil, err
		}
	}
	j.Records = []Record{{Prompt: text}}
	return j, nil
}

// Write samples the job's records with o, stopping at StopIDs of the job's stops, and writes them as JSON
// lines to w (WriteJSONL).
func (j *Job) Write(ctx context.Context, w io.Writer, o Options) error {
	o.Sample.Stop = StopIDs(j.Model, j.Tokenizer, j.Stops)
	return WriteJSONL(ctx, w, j.Model, j.Tokenizer, j.Records, o)
}

// Close frees the tasks' sandboxes.
func (j *Job) Close() error { return j.close() }
