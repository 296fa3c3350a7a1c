package completion_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/completion"
	"github.com/mcprl/mcprl/model"
)

// Open loads a text prompt as it is or, with Chat, rendered as the user's message after the system prompt; a
// tasks file gives each task's first-turn prompt and stops at </tool_call> too. Write samples the records as
// JSON lines.
func TestOpenAndWrite(t *testing.T) {
	ctx := context.Background()
	m, _ := tiny(t)
	dir := filepath.Join(t.TempDir(), "m")
	if err := m.Save(dir, model.SaveOptions{TokenizerDir: "../tokenizer/small/qwen2.5-2048"}); err != nil {
		t.Fatal(err)
	}
	src := completion.Source{ModelDir: dir, Engine: model.EngineSimpleGo, Prompt: "SELECT"}
	var warn bytes.Buffer
	j, err := completion.Open(ctx, src, &warn)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if len(j.Records) != 1 || j.Records[0].Prompt != "SELECT" || len(j.Stops) != 0 || !strings.HasPrefix(warn.String(), "engine: simplego") {
		t.Errorf("records %+v, stops %v, notes %q: want the prompt as it is, no extra stop, the engine line", j.Records, j.Stops, warn.String())
	}
	var out bytes.Buffer
	if err := j.Write(ctx, &out, completion.Options{BatchSize: 1, Sample: model.SampleOptions{MaxNewTokens: 3}}); err != nil {
		t.Fatal(err)
	}
	var rec completion.Record
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil || rec.Prompt != "SELECT" || len(rec.IDs) == 0 || len(rec.IDs) > 3 {
		t.Errorf("wrote %q (%v): want one record of at most 3 ids", out.String(), err)
	}

	src.Chat, src.SystemPrompt = true, "Be brief."
	if j, err = completion.Open(ctx, src, &warn); err != nil {
		t.Fatal(err)
	}
	if p := j.Records[0].Prompt; !strings.Contains(p, "<|im_start|>system\nBe brief.<|im_end|>") || !strings.HasSuffix(p, "<|im_start|>user\nSELECT<|im_end|>\n<|im_start|>assistant\n") {
		t.Errorf("chat prompt %q", p)
	}

	src = completion.Source{ModelDir: dir, Engine: model.EngineSimpleGo, Tasks: "../examples/customers/quick_tasks.jsonl", Fixtures: "../examples/fixtures"}
	if j, err = completion.Open(ctx, src, &warn); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if len(j.Records) != 8 || j.Records[0].ID == "" || len(j.Stops) != 1 || j.Stops[0] != "</tool_call>" {
		t.Errorf("%d records (first id %q), stops %v: want the 8 tasks' and </tool_call>", len(j.Records), j.Records[0].ID, j.Stops)
	}
}
