package eval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/task"
)

func call(sql string) string {
	return fmt.Sprintf("<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": %q}}\n</tool_call>", sql)
}

const (
	rightSQL = "SELECT COUNT(*) FROM customers WHERE LOWER(TRIM(status)) = 'inactive'"
	answer   = "13 customers are inactive.<|im_end|>"
)

// scripts are constructed agents on one task (13 inactive customers, any
// case or spacing): which of them recover from a failed or empty call.
var scripts = []struct {
	id, category string
	turns        []string
}{
	{"recover", "a", []string{call("SELECT COUNT(*) FROM customers WHERE stat = 'inactive'"), call(rightSQL), answer}},
	{"give-up", "a", []string{call("SELECT COUNT(*) FROM customers WHERE stat = 'inactive'"), "I cannot tell.<|im_end|>"}},
	{"empty-then-fix", "b", []string{call("SELECT id FROM customers WHERE status = 'INACTIVE '"), call(rightSQL), answer}},
	{"clean", "b", []string{call(rightSQL), answer}},
	{"hallucinate", "b", []string{"<tool_call>\n{\"name\": \"search_web\", \"arguments\": {\"q\": \"inactive customers\"}}\n</tool_call>", answer}},
	{"malformed", "b", []string{"<tool_call>\n{\"name\": \"query_database\", \"arguments\": {sql: oops}\n</tool_call>", call(rightSQL), answer}},
	// Right first, then an empty query: a setback it did not need to recover from.
	{"right-then-empty", "c", []string{call(rightSQL), call("SELECT id FROM customers WHERE status = 'nobody'"), answer}},
	// Right first, then calls until the rounds run out: the fourth is written, never run, and is no setback;
	// the trajectory never answers, so it fails (a question's assertions hold only for an answer).
	{"over-the-cap", "c", []string{call(rightSQL), call("SELECT 1"), call("SELECT 2"), call("SELECT 3")}},
}

// TestSelfCorrectionOnConstructedTrajectories replays scripted agents in the
// live sandbox and checks every metric against a count by hand: the first
// call errors (a bad column, an unknown tool, a malformed call) or comes
// back empty, and only some scripts go on to the right query.
func TestSelfCorrectionOnConstructedTrajectories(t *testing.T) {
	tasks, factories := loadTasks(t, customerTasks, "")
	base := tasks[1] // customers-inactive-variants-002: 13 inactive customers
	if base.GroundTruthAssertions[0] != rightSQL {
		t.Fatalf("example task changed: %q", base.GroundTruthAssertions)
	}
	var constructed []task.Task
	turns := map[string][]string{}
	for _, s := range scripts {
		tk := base
		tk.ID, tk.Category, tk.Golden = s.id, s.category, nil
		constructed = append(constructed, tk)
		turns[s.id] = s.turns
	}
	tok, tpl := smallTokenizer(t)
	ev := &eval.Evaluator{
		Policy:    eval.Scripted(tok, func(tk *task.Task) ([]string, error) { return turns[tk.ID], nil }),
		Tokenizer: tok, Template: tpl, Sandboxes: factories,
		Config: eval.Config{Samples: 2, K: 1, MaxCompletionLength: 2048, MaxToolCallingIterations: 3},
	}
	res, err := ev.Run(context.Background(), constructed)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2*len(scripts) {
		t.Fatalf("%d samples", len(res))
	}
	wantSuccess := map[string]bool{"recover": true, "empty-then-fix": true, "clean": true, "malformed": true, "right-then-empty": true}
	wantSetback := map[string]bool{"recover": true, "give-up": true, "empty-then-fix": true, "hallucinate": true, "malformed": true, "right-then-empty": true}
	wantRecovered := map[string]bool{"recover": true, "empty-then-fix": true, "malformed": true}
	for i, s := range res {
		if s.Task.ID != scripts[i/2].id || s.Index != i%2 {
			t.Fatalf("sample %d is %s #%d", i, s.Task.ID, s.Index)
		}
		if s.Success() != wantSuccess[s.Task.ID] {
			t.Errorf("%s: success %v, want %v (%s)", s.Task.ID, s.Success(), wantSuccess[s.Task.ID], s.Assertions.Reason)
		}
		if st := eval.StatsOf(s.Trajectory, s.Catalog); st.Setback != wantSetback[s.Task.ID] || st.Recovered != wantRecovered[s.Task.ID] {
			t.Errorf("%s: setback %v, recovered %v, want %v, %v (%+v)", s.Task.ID, st.Setback, st.Recovered,
				wantSetback[s.Task.ID], wantRecovered[s.Task.ID], st)
		}
	}
	capped := res[2*(len(scripts)-1)].Trajectory
	if last := capped.Turns[len(capped.Turns)-1]; !capped.Truncated || len(last.Calls) != 1 || !last.Calls[0].NotRun || last.Calls[0].Text != "" {
		t.Errorf("over-the-cap: the fourth call should be recorded as not run (truncated %v, %+v)", capped.Truncated, last.Calls)
	}
	rep, err := eval.Summarize(res, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Per script: calls (accurate, hallucinated, malformed) and turns:
	// recover 2 (1,0,0) 3; give-up 1 (0,0,0) 2; empty-then-fix 2 (2,0,0) 3;
	// clean 1 (1,0,0) 2; hallucinate 1 (0,1,0) 2; malformed 2 (1,0,1) 3;
	// right-then-empty 2 (2,0,0) 3; over-the-cap 4 (4,0,0) 4. Twice each.
	// Self-corrected: recover, empty-then-fix and malformed, of 6 with a setback.
	want := eval.Metrics{
		SuccessRate: 10.0 / 16, PassAtK: 5.0 / 8, ToolAccuracy: 22.0 / 30, HallucinationRate: 2.0 / 30,
		FormatErrorRate: 2.0 / 30, MeanTurns: 44.0 / 16, SelfCorrectionRate: 6.0 / 12,
		NTasks: 8, NTrajectories: 16, NSucceeded: 10, NCalls: 30, NSetback: 12, NSelfCorrected: 6,
	}
	checkMetrics(t, "overall", &rep.Metrics, &want)
	checkMetrics(t, "a", rep.Categories["a"], &eval.Metrics{
		SuccessRate: 0.5, PassAtK: 0.5, ToolAccuracy: 2.0 / 6, HallucinationRate: 0, FormatErrorRate: 0,
		MeanTurns: 2.5, SelfCorrectionRate: 0.5, NTasks: 2, NTrajectories: 4, NSucceeded: 2, NCalls: 6, NSetback: 4, NSelfCorrected: 2,
	})
	checkMetrics(t, "c", rep.Categories["c"], &eval.Metrics{
		SuccessRate: 0.5, PassAtK: 0.5, ToolAccuracy: 1, HallucinationRate: 0, FormatErrorRate: 0,
		MeanTurns: 3.5, SelfCorrectionRate: 0, NTasks: 2, NTrajectories: 4, NSucceeded: 2, NCalls: 12, NSetback: 2, NSelfCorrected: 0,
	})

	// The saved trajectory shows the failed call, its error and the breakdown.
	var buf bytes.Buffer
	if err := eval.WriteJSONL(&buf, res[:1]); err != nil {
		t.Fatal(err)
	}
	var rec eval.Record
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.TaskID != "recover" || !rec.Success || len(rec.Turns) != 3 || !rec.Turns[0].Calls[0].IsError ||
		rec.Turns[1].Calls[0].IsError || rec.Reward["assertions"].Value != 1 || len(rec.Reward["assertions"].Checks) != 1 {
		t.Errorf("record: %s", buf.String())
	}
}

func checkMetrics(t *testing.T, name string, got, want *eval.Metrics) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no metrics", name)
	}
	rates := []struct {
		key       string
		got, want eval.Rate
	}{
		{"success_rate", got.SuccessRate, want.SuccessRate}, {"pass_at_k", got.PassAtK, want.PassAtK},
		{"tool_accuracy", got.ToolAccuracy, want.ToolAccuracy}, {"hallucination_rate", got.HallucinationRate, want.HallucinationRate},
		{"format_error_rate", got.FormatErrorRate, want.FormatErrorRate}, {"mean_turns", got.MeanTurns, want.MeanTurns},
		{"self_correction_rate", got.SelfCorrectionRate, want.SelfCorrectionRate},
	}
	for _, r := range rates {
		if math.Abs(float64(r.got-r.want)) > 1e-12 {
			t.Errorf("%s: %s = %v, want %v", name, r.key, r.got, r.want)
		}
	}
	if got.NTasks != want.NTasks || got.NTrajectories != want.NTrajectories || got.NSucceeded != want.NSucceeded ||
		got.NCalls != want.NCalls || got.NSetback != want.NSetback || got.NSelfCorrected != want.NSelfCorrected || got.NErrors != want.NErrors {
		t.Errorf("%s: counts %+v, want %+v", name, *got, *want)
	}
}

// TestSummarizePassAtK: pass@k averages the per-task estimator over tasks
// with unequal success counts; rates without a denominator are null.
func TestSummarizePassAtK(t *testing.T) {
	a, b := &task.Task{ID: "a", GroundTruthAssertions: []string{"x"}}, &task.Task{ID: "b", GroundTruthAssertions: []string{"x"}}
	var samples []*eval.Sample
	for i := range 4 {
		v := 0.0
		if i == 2 {
			v = 1
		}
		samples = append(samples,
			&eval.Sample{Task: a, Index: i, Trajectory: &chat.Trajectory{}, Assertions: reward.Score{Value: v}},
			&eval.Sample{Task: b, Index: i, Trajectory: &chat.Trajectory{}, Assertions: reward.Score{Value: 0.5}})
	}
	rep, err := eval.Summarize(samples, 2)
	if err != nil {
		t.Fatal(err)
	}
	// a: n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 0.5; b: c=0 (partial credit is not success).
	if rep.PassAtK != 0.25 || rep.SuccessRate != 1.0/8 || rep.K != 2 || rep.Samples != 4 {
		t.Errorf("report %+v", rep)
	}
	if rep.ToolAccuracy.Defined() || rep.SelfCorrectionRate.Defined() {
		t.Errorf("rates without calls: %v %v", rep.ToolAccuracy, rep.SelfCorrectionRate)
	}
	b2, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b2, []byte(`"tool_accuracy":null`)) || !bytes.Contains(b2, []byte(`"pass_at_k":0.25`)) {
		t.Errorf("JSON: %s", b2)
	}
	if _, err := eval.Summarize(samples, 5); err == nil {
		t.Error("k above the samples per task gave no error")
	}
}
