package eval_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/eval"
)

// Count takes k and the samples per task (k when not given) and refuses k < 1 or more than the samples.
func TestConfigCount(t *testing.T) {
	var c eval.Config
	if err := c.Count(4, 0); err != nil || c.K != 4 || c.Samples != 4 {
		t.Errorf("k 4: %v, k %d, samples %d", err, c.K, c.Samples)
	}
	if err := c.Count(2, 8); err != nil || c.K != 2 || c.Samples != 8 {
		t.Errorf("k 2 of 8: %v, k %d, samples %d", err, c.K, c.Samples)
	}
	for _, ks := range [][2]int{{0, 0}, {4, 2}} {
		if err := c.Count(ks[0], ks[1]); err == nil || !strings.Contains(err.Error(), "need 1 <= k <= samples") {
			t.Errorf("k %d, samples %d: %v", ks[0], ks[1], err)
		}
	}
}

// Report.Write writes one JSON object and a newline, or the table.
func TestReportWrite(t *testing.T) {
	rep, err := eval.Summarize(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	var js, table strings.Builder
	if err := rep.Write(&js, true); err != nil {
		t.Fatal(err)
	}
	var back eval.Report
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil || !strings.HasSuffix(js.String(), "}\n") || strings.Count(js.String(), "\n") != 1 {
		t.Errorf("JSON %q: %v", js.String(), err)
	}
	if err := rep.Write(&table, false); err != nil || !strings.HasPrefix(table.String(), "category") {
		t.Errorf("table %q: %v", table.String(), err)
	}
}
