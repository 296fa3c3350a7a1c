package rollout_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
)

// countOrders is a reward that reads the trajectory's sandbox when it
// ends: how many orders its database holds.
type countOrders struct{}

func (countOrders) Name() string { return "orders" }

func (countOrders) Score(ctx context.Context, in *reward.Input) (reward.Score, error) {
	res, err := in.Sandbox.DB().Oracle(ctx, "SELECT COUNT(*) FROM orders")
	if err != nil {
		return reward.Score{}, err
	}
	n, _ := res.Rows[0][0].(int64)
	return reward.Score{Value: float64(n)}, nil
}

// A trajectory that meets a setback is recorded there with a fork of its
// sandbox; Branch continues it from the setback's observation in forks of
// that state: the root's later changes never reach the branches, nor the
// branches' each other's, and every continuation is a whole trajectory
// (the root's prefix, token for token, then its own turns), scored as any.
func TestBranchAtSetback(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	root := []string{
		call("query_database", `{"sql": "DELETE FROM orders WHERE id <= 10"}`),
		call("query_database", `{"sql": "SELECT COUNT(*) FROM custmers"}`), // the setback: no such table
		call("query_database", `{"sql": "DELETE FROM orders"}`),
		"Done.<|im_end|>",
	}
	triggers, err := rollout.NewTriggers(rollout.AllTriggers)
	if err != nil {
		t.Fatal(err)
	}
	r := runner(t, &rollout.Script{Scripts: [][][]int{script(t, root...)}}, rollout.Config{NumGenerations: 2, MaxCompletionLength: 2048, MaxToolCallingIterations: 5})
	r.Rewards = []reward.Func{countOrders{}}
	r.Branching = triggers
	roots, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range roots {
		sb := res.Setback
		if sb == nil || sb.Trigger != rollout.TriggerToolError || sb.Turn != 1 {
			t.Fatalf("root %d: setback %+v, want a tool_error at turn 1", i, sb)
		}
		if res.Scores[0].Value != 0 {
			t.Errorf("root %d: %v orders at its end, want 0", i, res.Scores[0].Value)
		}
	}
	// Two continuations of each root: one recovers (counts the orders the
	// setback's state has, then deletes some of its own), one answers.
	branches := []string{
		call("query_database", `{"sql": "SELECT COUNT(*) FROM orders"}`),
		call("query_database", `{"sql": "DELETE FROM orders WHERE id <= 20"}`),
		"There are 30 orders.<|im_end|>",
	}
	r.Policy = &rollout.Script{Scripts: [][][]int{script(t, branches...), script(t, "I could not tell.<|im_end|>")}}
	got, err := r.Branch(context.Background(), roots, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("%d continuations, want 2 roots x 2", len(got))
	}
	for k, b := range got {
		rt := roots[k/2]
		if b.BranchAt != rt.Setback.Len || !slices.Equal(b.Tokens[:b.BranchAt], rt.Tokens[:rt.Setback.Len]) {
			t.Errorf("continuation %d: its prefix is not its root's %d tokens", k, rt.Setback.Len)
		}
		if slices.Contains(b.Mask[:b.BranchAt], 1) != slices.Contains(rt.Mask[:rt.Setback.Len], 1) {
			t.Errorf("continuation %d: the prefix's loss mask differs from the root's", k)
		}
		if b.Setback != nil {
			t.Errorf("continuation %d recorded a setback of its own", k)
		}
		calls := b.Calls()
		if len(b.Turns) < 3 || b.Turns[1].Text != rt.Turns[1].Text {
			t.Fatalf("continuation %d: turns %+v", k, b.Turns)
		}
		if k%2 == 0 {
			// The setback's state: 30 orders (10 deleted before it), not the root's later 0.
			if len(calls) != 4 || !strings.Contains(calls[2].Text, "30") {
				t.Errorf("continuation %d: %+v", k, calls)
			}
			if b.Answer != "There are 30 orders." || b.Scores[0].Value != 20 {
				t.Errorf("continuation %d: answer %q, %v orders at its end, want 20", k, b.Answer, b.Scores[0].Value)
			}
		} else if b.Answer != "I could not tell." || b.Scores[0].Value != 30 {
			// Its sibling's DELETE did not reach it.
			t.Errorf("continuation %d: answer %q, %v orders at its end, want 30", k, b.Answer, b.Scores[0].Value)
		}
	}
	for _, rt := range roots {
		if err := rt.Setback.Close(); err != nil {
			t.Error(err)
		}
	}
}

// A forced continuation starts its first turn with the tool-call opener,
// which the policy did not sample: the opener's tokens are in the
// trajectory and its text (the call parses and runs), but carry Mask 0; the
// policy's own tokens after them carry 1. The others of the branch group
// are sampled freely.
func TestBranchForcedOpener(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	triggers, err := rollout.NewTriggers(rollout.AllTriggers)
	if err != nil {
		t.Fatal(err)
	}
	root := []string{call("query_database", `{"sql": "SELECT COUNT(*) FROM custmers"}`), "None.<|im_end|>"}
	r := runner(t, &rollout.Script{Scripts: [][][]int{script(t, root...)}}, rollout.Config{NumGenerations: 1, MaxCompletionLength: 2048, MaxToolCallingIterations: 3})
	r.Branching = triggers
	roots, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	defer roots[0].Setback.Close()
	body := strings.TrimPrefix(call("query_database", `{"sql": "SELECT COUNT(*) FROM customers"}`), rollout.ForcedOpener)
	r.Policy = &rollout.Script{Scripts: [][][]int{
		script(t, body, "There are 36 customers.<|im_end|>"),
		script(t, "I could not tell.<|im_end|>"),
		script(t, "I could not tell.<|im_end|>"),
	}}
	got, err := r.Branch(context.Background(), roots, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := smallTokenizer(t)
	opener := encode(tok, rollout.ForcedOpener)
	forced := got[0]
	own := forced.Tokens[forced.BranchAt:]
	if !forced.Forced || !slices.Equal(own[:len(opener)], opener) {
		t.Fatalf("continuation 0: forced %v, its own tokens start %v, want the opener %v", forced.Forced, own[:min(len(own), len(opener))], opener)
	}
	if m := forced.Mask[forced.BranchAt : forced.BranchAt+len(opener)]; slices.Contains(m, 1) {
		t.Errorf("the opener's tokens are trained: mask %v", m)
	}
	if forced.Mask[forced.BranchAt+len(opener)] != 1 {
		t.Errorf("the policy's first token after the opener is not trained")
	}
	turn := forced.Turns[1]
	if !strings.HasPrefix(turn.Text, rollout.ForcedOpener) || len(turn.Calls) != 1 || turn.Calls[0].IsError || !strings.Contains(turn.Calls[0].Text, "36") {
		t.Errorf("forced turn %q: calls %+v", turn.Text, turn.Calls)
	}
	if forced.Answer != "There are 36 customers." {
		t.Errorf("forced continuation's answer %q", forced.Answer)
	}
	for k, b := range got[1:] {
		if b.Forced || b.Answer != "I could not tell." || slices.Contains(b.Tokens[b.BranchAt:], opener[0]) {
			t.Errorf("free continuation %d: forced %v, answer %q", k+1, b.Forced, b.Answer)
		}
	}
}

// With ForceLook a forced continuation looks before it retries: it begins
// with a whole call, the look its setback suggests (the tables after a
// missing one, the values of the column an empty query filtered on), which
// runs before the policy samples, and the tool-call opener follows the
// look's observation. The look, its observation and the opener carry Mask
// 0 and are the policy's prompt; the call it writes after the opener and
// everything later are its own. A setback with no query to read (a
// malformed call) is forced with the opener alone.
func TestBranchForcedLook(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	triggers, err := rollout.NewTriggers(rollout.AllTriggers)
	if err != nil {
		t.Fatal(err)
	}
	roots := [][][]int{
		script(t, call("query_database", `{"sql": "SELECT COUNT(*) FROM custmers"}`), "None.<|im_end|>"),
		script(t, call("query_database", `{"sql": "SELECT full_name FROM customers WHERE status = 'ACTIVE'"}`), "None.<|im_end|>"),
		script(t, "<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\n</tool_call>", "None.<|im_end|>"),
	}
	r := runner(t, &rollout.Script{Scripts: roots}, rollout.Config{NumGenerations: 3, MaxCompletionLength: 2048, MaxToolCallingIterations: 3})
	r.Branching, r.ForceLook = triggers, true
	got, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range got {
		defer res.Setback.Close()
	}
	if got[0].Setback.Trigger != rollout.TriggerToolError || got[1].Setback.Trigger != rollout.TriggerEmptyResult || got[2].Setback.Trigger != rollout.TriggerMalformedCall {
		t.Fatalf("setbacks %+v, %+v, %+v", got[0].Setback, got[1].Setback, got[2].Setback)
	}
	body := func(sql string) string {
		return strings.TrimPrefix(call("query_database", `{"sql": "`+sql+`"}`), rollout.ForcedOpener)
	}
	free := script(t, "I could not tell.<|im_end|>")
	rec := &recorder{P: &rollout.Script{Scripts: [][][]int{
		script(t, body("SELECT COUNT(*) FROM customers"), "There are 36 customers.<|im_end|>"), free,
		script(t, body("SELECT full_name FROM customers WHERE status = 'Active'"), "Two.<|im_end|>"), free,
		script(t, body("SELECT 1"), "One.<|im_end|>"), free,
	}}}
	r.Policy = rec
	branches, err := r.Branch(context.Background(), got, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := smallTokenizer(t)
	opener := encode(tok, rollout.ForcedOpener)
	looks := []string{
		call("query_database", `{"sql":"SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"}`),
		call("query_database", `{"sql":"SELECT DISTINCT status FROM customers ORDER BY status LIMIT 20"}`),
	}
	for k, want := range []struct{ look, retry string }{{"customers", "36"}, {"Active", "full_name"}} {
		b := branches[2*k]
		ids := encode(tok, looks[k])
		p := rec.batches[0].prompts[2*k]
		spans := [][2]int{{b.BranchAt, b.BranchAt + len(ids)}, {len(p) - len(opener), len(p)}}
		if !b.Forced || !b.ForcedLook || !slices.Equal(b.ForcedSpans, spans) || !slices.Equal(b.Tokens[b.BranchAt:b.BranchAt+len(ids)], ids) {
			t.Fatalf("continuation %d: forced %v, spans %v; want the look %q then the opener at %v", 2*k, b.Forced, b.ForcedSpans, looks[k], spans)
		}
		// The policy started after the look, its observation and the
		// opener: its prompt is the trajectory up to its first sample,
		// none of it trained, and every later token is its samples and
		// observations.
		if !slices.Equal(p, b.Tokens[:len(p)]) || !slices.Equal(p[len(p)-len(opener):], opener) {
			t.Fatalf("continuation %d: the policy's prompt (%d tokens) is not the trajectory through the look's observation and the opener", 2*k, len(p))
		}
		if m := b.Mask[b.BranchAt:len(p)]; slices.Contains(m, 1) {
			t.Errorf("continuation %d: the look, its observation or the opener is trained: mask %v", 2*k, m)
		}
		var own []int
		for _, e := range rec.batches[0].events[2*k] {
			own = append(own, e.ids...)
		}
		if !slices.Equal(b.Tokens[len(p):], own) || b.Mask[len(p)] != 1 {
			t.Errorf("continuation %d: after its prompt, the tokens are not the policy's samples and observations", 2*k)
		}
		lookTurn, retry := b.Turns[1], b.Turns[2]
		if lookTurn.Text != looks[k] || len(lookTurn.Calls) != 1 || lookTurn.Calls[0].IsError || !strings.Contains(lookTurn.Calls[0].Text, want.look) {
			t.Errorf("continuation %d: the look's turn %q, calls %+v", 2*k, lookTurn.Text, lookTurn.Calls)
		}
		if !strings.HasPrefix(retry.Text, rollout.ForcedOpener) || len(retry.Calls) != 1 || retry.Calls[0].IsError || !strings.Contains(retry.Calls[0].Text, want.retry) {
			t.Errorf("continuation %d: the retry's turn %q, calls %+v", 2*k, retry.Text, retry.Calls)
		}
	}
	if b := branches[0]; len(b.Turns) != 4 || b.Answer != "There are 36 customers." {
		t.Errorf("continuation 0 after the look: turns %+v, answer %q", b.Turns, b.Answer)
	}
	if b := branches[4]; !b.Forced || b.ForcedLook || !slices.Equal(b.ForcedSpans, [][2]int{{b.BranchAt, b.BranchAt + len(opener)}}) ||
		!slices.Equal(b.Tokens[b.BranchAt:b.BranchAt+len(opener)], opener) || b.Answer != "One." {
		t.Errorf("continuation 4 (a malformed call's setback): forced %v, spans %v, answer %q; want the opener alone", b.Forced, b.ForcedSpans, b.Answer)
	}
	for k := 1; k < len(branches); k += 2 {
		if b := branches[k]; b.Forced || b.ForcedSpans != nil || b.Answer != "I could not tell." {
			t.Errorf("free continuation %d: forced %v, answer %q", k, b.Forced, b.Answer)
		}
	}
}

// Triggers name the setbacks a run branches at; an unknown name is refused.
func TestTriggers(t *testing.T) {
	if _, err := rollout.NewTriggers([]string{"tool_error", "sql_eror"}); err == nil || !strings.Contains(err.Error(), "sql_eror") {
		t.Errorf("unknown trigger: %v", err)
	}
	q := chat.Call{Name: "query_database"}
	lint := chat.Call{Name: "run_linter"}
	cases := []struct {
		c    chat.CallResult
		want string
	}{
		{chat.CallResult{Call: q, IsError: true, Text: "SQL error: no such table: custmers"}, rollout.TriggerToolError},
		{chat.CallResult{ParseError: "bad_json", IsError: true}, rollout.TriggerMalformedCall},
		{chat.CallResult{Call: q, Structured: map[string]any{"columns": []any{"id"}, "rows": []any{}}}, rollout.TriggerEmptyResult},
		{chat.CallResult{Call: q, Structured: map[string]any{"columns": []any{"id"}, "rows": []any{[]any{1}}}}, ""},
		{chat.CallResult{Call: q, Structured: map[string]any{"columns": []any{}, "rows": []any{}, "rows_affected": 3}}, ""}, // a write
		{chat.CallResult{Call: lint, Structured: map[string]any{"exit_code": 1}}, rollout.TriggerLintFailure},
		{chat.CallResult{Call: lint, Text: "f.sql:3: no such column\nexit code 2"}, rollout.TriggerLintFailure},
		{chat.CallResult{Call: lint, Structured: map[string]any{"exit_code": 0}}, ""},
	}
	all, _ := rollout.NewTriggers(rollout.AllTriggers)
	for i, c := range cases {
		if got := all.Match(c.c); got != c.want {
			t.Errorf("case %d: %q, want %q", i, got, c.want)
		}
	}
	onlyErrors, _ := rollout.NewTriggers([]string{rollout.TriggerToolError})
	if got := onlyErrors.Match(cases[2].c); got != "" {
		t.Errorf("empty result with only tool_error on: %q", got)
	}
}
