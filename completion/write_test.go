package completion_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/completion"
	"github.com/mcprl/mcprl/model"
)

// WriteJSONL writes one JSON line per record, in order, with what Generate
// fills in, and without HTML escaping.
func TestWriteJSONL(t *testing.T) {
	m, tok := tiny(t)
	records := []completion.Record{{ID: "a", Prompt: "<b>&"}, {Prompt: "SELECT"}, {Prompt: "c"}}
	o := completion.Options{BatchSize: 2, Seed: 1, Sample: model.SampleOptions{MaxNewTokens: 3}}
	var out bytes.Buffer
	if err := completion.WriteJSONL(context.Background(), &out, m, tok, records, o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], `{"id":"a","prompt":"<b>&",`) {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, l := range lines {
		var r completion.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Prompt != records[i].Prompt || len(r.IDs) == 0 || r.FinishReason == "" {
			t.Errorf("line %d: %s (%v)", i, l, err)
		}
	}
}
