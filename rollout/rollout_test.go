package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/internal/pgtest"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// helperEnv makes the test binary run as an external stdio MCP server.
const helperEnv = "MCPRL_ROLLOUT_HELPER_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		runHelperServer()
		return
	}
	os.Exit(m.Run())
}

// runHelperServer serves tools that misbehave on purpose: hang (never
// answers), crash (the process exits), sleep (answers after ms).
func runHelperServer() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "helper", Version: "1"}, nil)
	empty := &mcp.Tool{InputSchema: map[string]any{"type": "object"}}
	hang, crash := *empty, *empty
	hang.Name, hang.Description = "hang", "Never answers."
	crash.Name, crash.Description = "crash", "Exits the server process."
	srv.AddTool(&hang, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { select {} })
	srv.AddTool(&crash, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	type sleepIn struct {
		MS int `json:"ms" jsonschema:"milliseconds"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "sleep", Description: "Sleeps."}, func(_ context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
		time.Sleep(time.Duration(in.MS) * time.Millisecond)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("slept %d", in.MS)}}}, nil, nil
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
}

func helperFixture(t testing.TB) *task.Fixture {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return customersWith(t, fmt.Sprintf("tools: [query_database]\nmcp_servers:\n  - name: helper\n    command: [%q, \"-test.run=^$\"]\n    env: {%s: \"1\"}\n", exe, helperEnv))
}

// call renders a tool call as the Qwen template writes one.
func call(name, args string) string {
	return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>"
}

// script encodes turns as token lists (a Replay script).
func script(t testing.TB, turns ...string) [][]int {
	tok, _ := smallTokenizer(t)
	var out [][]int
	for _, s := range turns {
		out = append(out, encode(tok, s))
	}
	return out
}

func runner(t testing.TB, p policy.Policy, cfg rollout.Config) *rollout.Runner {
	tok, tpl := smallTokenizer(t)
	return &rollout.Runner{Policy: p, Tokenizer: tok, Template: tpl, Config: cfg}
}

// conversation rebuilds the chat a trajectory of tk had, from its turns.
func conversation(tk *task.Task, tr *chat.Trajectory) []chat.Message {
	var msgs []chat.Message
	if tk.SystemPrompt != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: tk.SystemPrompt})
	}
	msgs = append(msgs, chat.Message{Role: "user", Content: tk.Task})
	for _, turn := range tr.Turns {
		msgs = append(msgs, chat.Message{Role: "assistant", Content: turn.Text})
		for _, c := range turn.Calls {
			if c.Text == "" {
				continue // never ran (past max_tool_calling_iterations or the budget)
			}
			msgs = append(msgs, chat.Message{Role: "tool", Content: c.Text, Name: c.Call.Name})
		}
	}
	return msgs
}

// TestGoldenReplay: the seed task's golden trajectory against the live
// sandbox. The tokens are prompt + sampled + observation ids exactly, and
// they decode to the chat template's own render of the conversation (no
// token drift), with the system prompt given and with the tools rendered by
// the template from tools/list.
func TestGoldenReplay(t *testing.T) {
	tok, tpl := smallTokenizer(t)
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	turns := []string{
		call("query_database", `{"sql": "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"}`),
		"Checking the file.\n" + call("run_linter", `{"path": "inactive_customers.sql"}`),
		"There are 7 inactive customers.<|im_end|>",
	}
	for _, withSystem := range []bool{true, false} {
		tk := seedTask()
		if !withSystem {
			tk.SystemPrompt = ""
		}
		rec := &recorder{P: &rollout.Script{Scripts: [][][]int{script(t, turns...)}}}
		r := runner(t, rec, rollout.Config{NumGenerations: 2, MaxCompletionLength: 1024, MaxToolCallingIterations: 5})
		trajs, err := r.Run(context.Background(), []rollout.Job{{Task: tk, Factory: f}})
		if err != nil {
			t.Fatal(err)
		}
		if len(trajs) != 2 || len(rec.batches) != 1 || !rec.batches[0].closed {
			t.Fatalf("%d trajectories, %d batches", len(trajs), len(rec.batches))
		}
		for i, tr := range trajs {
			checkTokenInTokenOut(t, rec.batches[0], i, tr.Trajectory)
			if tr.Error != "" || tr.Truncated || len(tr.Turns) != 3 {
				t.Fatalf("error %q truncated %v turns %d", tr.Error, tr.Truncated, len(tr.Turns))
			}
			if tr.Answer != "There are 7 inactive customers." {
				t.Errorf("answer %q", tr.Answer)
			}
			c := tr.Calls()
			if len(c) != 2 || c[0].IsError || !strings.Contains(c[0].Text, "7") || c[1].IsError {
				t.Errorf("calls %+v", c)
			}
			if !strings.Contains(decode(tok, tr.Tokens), "<tool_response>") {
				t.Error("no tool response in the tokens")
			}
			want, err := tpl.Render(conversation(tk, tr.Trajectory), toolSchemas(tk, f), false)
			if err != nil {
				t.Fatal(err)
			}
			if got := decode(tok, tr.Tokens); got+"\n" != want {
				t.Errorf("system prompt %v: decoded tokens differ from the template's render:\n got %q\nwant %q", withSystem, got, want)
			}
		}
	}
}

func toolSchemas(tk *task.Task, f *sandbox.Factory) []json.RawMessage {
	if tk.SystemPrompt != "" {
		return nil
	}
	return toolcallSchemas(f)
}

// TestMalformedCalls: bad JSON, an unknown tool, bad arguments, a stray
// closing tag and an unterminated call become observations the model reads;
// nothing crashes.
func TestMalformedCalls(t *testing.T) {
	tok, tpl := smallTokenizer(t)
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	turns := []string{
		"<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": }\n</tool_call>",
		call("drop_everything", `{}`),
		call("query_database", `{"sql": 7}`),
		`{"name": "query_database"}</tool_call>`,
		call("query_database", `{"sql": "SELEC nonsense"}`),
		"<tool_call>\n{\"name\": \"query_database\"<|im_end|>",
	}
	rec := &recorder{P: &rollout.Script{Scripts: [][][]int{script(t, turns...)}}}
	r := runner(t, rec, rollout.Config{NumGenerations: 1, MaxCompletionLength: 2048, MaxToolCallingIterations: 10})
	tk := seedTask()
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: tk, Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	tr := trajs[0]
	checkTokenInTokenOut(t, rec.batches[0], 0, tr.Trajectory)
	if tr.Error != "" || tr.Truncated || len(tr.Turns) != len(turns) {
		t.Fatalf("error %q truncated %v turns %d", tr.Error, tr.Truncated, len(tr.Turns))
	}
	text := decode(tok, tr.Tokens)
	for k, turn := range tr.Turns[:5] {
		if len(turn.Calls) != 1 || !turn.Calls[0].IsError || turn.Calls[0].Text == "" {
			t.Fatalf("turn %d: calls %+v", k, turn.Calls)
		}
		if !strings.Contains(text, "<tool_response>\n"+turn.Calls[0].Text+"\n</tool_response>") {
			t.Errorf("turn %d: the model never reads %q", k, turn.Calls[0].Text)
		}
	}
	if tr.Turns[0].Calls[0].ParseError == "" || tr.Turns[3].Calls[0].ParseError == "" {
		t.Error("bad JSON or stray </tool_call> not reported as a parse error")
	}
	if tr.Turns[1].Calls[0].ParseError != "" || !strings.Contains(tr.Turns[1].Calls[0].Text, "drop_everything") {
		t.Errorf("unknown tool: %+v", tr.Turns[1].Calls[0])
	}
	last := tr.Turns[5]
	if len(last.Calls) != 1 || last.Calls[0].ParseError == "" || tr.Answer != "" {
		t.Errorf("unterminated call: %+v answer %q", last.Calls, tr.Answer)
	}
	// The unterminated call ended the turn with <|im_end|>: recorded, never run.
	want, err := tpl.Render(conversation(tk, tr.Trajectory)[:len(conversation(tk, tr.Trajectory))-1], nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if text+"\n" != want {
		t.Errorf("decoded tokens are not the template's render of the conversation:\n got %q\nwant %q", text, want)
	}
}

// TestChainModelTokenInTokenOut drives the rollout with a real Qwen2 whose
// weights make it write a well-formed call every turn (one the sandbox
// refuses for its missing sql argument): the trajectory's ids are the
// prompt, every sampled token and every observation, across turns, through
// the KV-cached session; max_tool_calling_iterations ends it truncated.
func TestChainModelTokenInTokenOut(t *testing.T) {
	tok, tpl := smallTokenizer(t)
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	m, chain := chainPolicyModel(t)
	rec := &recorder{P: &model.Policy{M: m, Capacity: 1024}}
	r := runner(t, rec, rollout.Config{NumGenerations: 3, MaxCompletionLength: 400, MaxToolCallingIterations: 2})
	tk := seedTask()
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: tk, Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range trajs {
		checkTokenInTokenOut(t, rec.batches[0], i, tr.Trajectory)
		if tr.Error != "" || !tr.Truncated || len(tr.Turns) != 3 {
			t.Fatalf("trajectory %d: error %q truncated %v turns %d", i, tr.Error, tr.Truncated, len(tr.Turns))
		}
		for k, turn := range tr.Turns {
			if turn.Text != decode(tok, chain[1:]) {
				t.Errorf("turn %d: %q", k, turn.Text)
			}
			if len(turn.Calls) != 1 || turn.Calls[0].Call.Name != "query_database" || turn.Calls[0].ParseError != "" {
				t.Fatalf("turn %d: %+v", k, turn.Calls)
			}
			if k < 2 && (!turn.Calls[0].IsError || !strings.Contains(turn.Calls[0].Text, "sql")) {
				t.Errorf("turn %d: the sandbox's refusal is missing: %+v", k, turn.Calls[0])
			}
			if k == 2 && turn.Calls[0].Text != "" {
				t.Errorf("a call past max_tool_calling_iterations ran: %q", turn.Calls[0].Text)
			}
		}
		sampled := 0
		for _, b := range tr.Mask {
			sampled += int(b)
		}
		if sampled != 3*(len(chain)-1) {
			t.Errorf("%d sampled tokens, want %d", sampled, 3*(len(chain)-1))
		}
		want, err := tpl.Render(conversation(tk, tr.Trajectory), nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := decode(tok, tr.Tokens); got+"<|im_end|>\n" != want {
			t.Errorf("decoded tokens differ from the template's render:\n got %q\nwant %q", got, want)
		}
	}
	// The old log-probs are the model's own, recomputed over the whole
	// sequence without a cache.
	checkOldLogProbs(t, m, trajs)
}

// TestRandomModelGarbage: a random model's text (temperature 1) never
// crashes a rollout; every trajectory ends with an answer or truncated.
func TestRandomModelGarbage(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	m := tinyModel(t, 3, true)
	rec := &recorder{P: &model.Policy{M: m, Capacity: 512}}
	r := runner(t, rec, rollout.Config{NumGenerations: 4, MaxCompletionLength: 96, MaxToolCallingIterations: 3,
		Sample: policy.SampleOptions{Temperature: 1, Seed: 5}})
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range trajs {
		checkTokenInTokenOut(t, rec.batches[0], i, tr.Trajectory)
		if tr.Error != "" || len(tr.Turns) == 0 || len(tr.Tokens)-tr.PromptLen > 96 {
			t.Errorf("trajectory %d: error %q, %d turns, %d completion tokens", i, tr.Error, len(tr.Turns), len(tr.Tokens)-tr.PromptLen)
		}
	}
}

// TestToolServerFailures: a hung and a crashed external MCP server each end
// the trajectory that called them, with the error recorded; the other
// trajectories of the run finish.
func TestToolServerFailures(t *testing.T) {
	for _, tool := range []string{"hang", "crash"} {
		t.Run(tool, func(t *testing.T) {
			f := newFactory(t, helperFixture(t), sandbox.Options{CallTimeout: 300 * time.Millisecond})
			good := script(t, call("query_database", `{"sql": "SELECT COUNT(*) FROM customers"}`), "36 customers.<|im_end|>")
			bad := script(t, call(tool, `{}`), "never reached<|im_end|>")
			var finished []string
			r := runner(t, &rollout.Script{Scripts: [][][]int{bad, good, good}}, rollout.Config{NumGenerations: 3, MaxCompletionLength: 512, MaxToolCallingIterations: 3})
			r.Rewards = []reward.Func{sandboxReward(func(ctx context.Context, sb *sandbox.Sandbox) error {
				_, err := sb.DB().Oracle(ctx, "SELECT 1")
				return err
			})}
			start := time.Now()
			trajs, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("run took %s", d)
			}
			if trajs[0].Error == "" || !strings.Contains(trajs[0].Error, tool) || len(trajs[0].Turns) != 1 {
				t.Errorf("%s: error %q, %d turns", tool, trajs[0].Error, len(trajs[0].Turns))
			}
			for _, tr := range trajs[1:] {
				if tr.Error != "" || tr.Answer != "36 customers." {
					t.Errorf("other trajectory: error %q answer %q", tr.Error, tr.Answer)
				}
				if len(tr.Errs) != 1 || tr.Errs[0] != nil {
					t.Errorf("other trajectory: its sandbox could not be read after it ended: %v", tr.Errs)
				}
				finished = append(finished, tr.Answer)
			}
			if len(finished) != 2 {
				t.Errorf("finished %v", finished)
			}
		})
	}
}

// TestLimits: max_tool_calling_iterations and max_completion_length end a
// trajectory marked truncated, within its budget.
func TestLimits(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	q := call("query_database", `{"sql": "SELECT COUNT(*) FROM customers"}`)
	long := strings.Repeat("All customers are fine. ", 40) + "<|im_end|>"
	rec := &recorder{P: &rollout.Script{Scripts: [][][]int{script(t, q, q, q, q, q)}}}
	r := runner(t, rec, rollout.Config{NumGenerations: 1, MaxCompletionLength: 1000, MaxToolCallingIterations: 2})
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	iter := trajs[0].Trajectory
	checkTokenInTokenOut(t, rec.batches[0], 0, iter)
	rec = &recorder{P: &rollout.Script{Scripts: [][][]int{script(t, long)}}}
	r = runner(t, rec, rollout.Config{NumGenerations: 1, MaxCompletionLength: 150, MaxToolCallingIterations: 2})
	if trajs, err = r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}}); err != nil {
		t.Fatal(err)
	}
	length := trajs[0].Trajectory
	checkTokenInTokenOut(t, rec.batches[0], 0, length)
	if !iter.Truncated || len(iter.Turns) != 3 || len(iter.Calls()) != 3 || iter.Turns[2].Calls[0].Text != "" {
		t.Errorf("iterations: truncated %v, %d turns", iter.Truncated, len(iter.Turns))
	}
	if !length.Truncated || len(length.Tokens)-length.PromptLen != 150 || length.Answer == "" {
		t.Errorf("length: truncated %v, %d completion tokens", length.Truncated, len(length.Tokens)-length.PromptLen)
	}
	// An observation that does not fit ends the trajectory before it.
	rec = &recorder{P: &rollout.Script{Scripts: [][][]int{script(t, q, q)}}}
	r = runner(t, rec, rollout.Config{NumGenerations: 1, MaxCompletionLength: 60, MaxToolCallingIterations: 5})
	trajs, err = r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	checkTokenInTokenOut(t, rec.batches[0], 0, trajs[0].Trajectory)
	if !trajs[0].Truncated || len(trajs[0].Tokens)-trajs[0].PromptLen > 60 {
		t.Errorf("observation past the budget: truncated %v, %d tokens", trajs[0].Truncated, len(trajs[0].Tokens)-trajs[0].PromptLen)
	}
}

// TestCancel: cancelling the context stops a run stuck in tool calls
// promptly; every sandbox is closed and no goroutine is left.
func TestCancel(t *testing.T) {
	f := newFactory(t, helperFixture(t), sandbox.Options{CallTimeout: time.Minute})
	before := runtime.NumGoroutine()
	var sbs []*sandbox.Sandbox
	hang := script(t, call("hang", `{}`), "x<|im_end|>")
	r := runner(t, &rollout.Script{Scripts: [][][]int{hang}}, rollout.Config{NumGenerations: 4, MaxCompletionLength: 512, MaxToolCallingIterations: 3})
	r.Rewards = []reward.Func{sandboxReward(func(_ context.Context, sb *sandbox.Sandbox) error {
		sbs = append(sbs, sb)
		return nil
	})}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Run(ctx, []rollout.Job{{Task: seedTask(), Factory: f}})
	if err == nil {
		t.Error("a cancelled run returned no error")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancelled run took %s", d)
	}
	if len(sbs) != 4 {
		t.Errorf("%d trajectories finished", len(sbs))
	}
	for _, sb := range sbs {
		if _, err := sb.Call(context.Background(), "query_database", json.RawMessage(`{"sql": "SELECT 1"}`)); err == nil {
			t.Error("a sandbox is still open after Run returned")
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestForksAndConcurrency: each trajectory of a prompt has its own fork (an
// UPDATE in one is not seen by another), and the tool calls of one step
// run concurrently.
func TestForksAndConcurrency(t *testing.T) {
	f := newFactory(t, helperFixture(t), sandbox.Options{CallTimeout: 10 * time.Second})
	count := call("query_database", `{"sql": "SELECT COUNT(*) AS n FROM customers WHERE status = 'inactive'"}`)
	del := script(t, call("query_database", `{"sql": "UPDATE customers SET status = 'active' WHERE status = 'inactive'"}`), count, "done<|im_end|>")
	keep := script(t, call("sleep", `{"ms": 600}`), count, "done<|im_end|>")
	const n = 6
	r := runner(t, &rollout.Script{Scripts: [][][]int{del, keep}}, rollout.Config{NumGenerations: n, MaxCompletionLength: 512, MaxToolCallingIterations: 3})
	start := time.Now()
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	// n/2 sleeps of 600ms in one step: concurrent, well under their sum.
	if d := time.Since(start); d > 1300*time.Millisecond {
		t.Errorf("a step's tool calls did not run concurrently: %s for %d sleeps of 600ms", d, n/2)
	}
	for i, tr := range trajs {
		if tr.Error != "" || len(tr.Turns) != 3 {
			t.Fatalf("trajectory %d: %q, %d turns", i, tr.Error, len(tr.Turns))
		}
		got := tr.Turns[1].Calls[0].Text
		want := "7"
		if i%2 == 0 {
			want = "0"
		}
		if !strings.Contains(got, want) || tr.Turns[1].Calls[0].IsError {
			t.Errorf("trajectory %d counts %q, want %s", i, got, want)
		}
	}
}

// TestGreedyDeterminism: the same seed gives the same trajectories, greedy
// and sampled; another seed samples differently.
func TestGreedyDeterminism(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	m := tinyModel(t, 11, true)
	run := func(temp float64, seed int64) [][]int {
		r := runner(t, &model.Policy{M: m, Capacity: 256}, rollout.Config{NumGenerations: 3, MaxCompletionLength: 24, MaxToolCallingIterations: 2,
			Sample: policy.SampleOptions{Temperature: temp, Seed: seed}})
		trajs, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}, {Task: seedTask(), Factory: f}})
		if err != nil {
			t.Fatal(err)
		}
		var out [][]int
		for _, tr := range trajs {
			out = append(out, tr.Tokens)
		}
		return out
	}
	same := func(a, b [][]int) bool {
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return len(a) == len(b)
	}
	g1, g2 := run(0, 1), run(0, 2)
	if !same(g1, g2) {
		t.Error("greedy trajectories differ between runs")
	}
	for i := 1; i < len(g1); i++ {
		if !equal(g1[0], g1[i]) {
			t.Errorf("greedy trajectory %d differs from 0 on the same prompt", i)
		}
	}
	s1, s2, s3 := run(1, 7), run(1, 7), run(1, 8)
	if !same(s1, s2) {
		t.Error("sampled trajectories differ for the same seed")
	}
	if same(s1, s3) {
		t.Error("sampled trajectories are the same for another seed")
	}
}

// failingAppend is a policy whose batches refuse observations.
type failingAppend struct{ policy.Policy }

type failingBatch struct{ policy.Batch }

func (p failingAppend) NewBatch(ctx context.Context, prompts [][]int, opts policy.SampleOptions) (policy.Batch, error) {
	b, err := p.Policy.NewBatch(ctx, prompts, opts)
	return failingBatch{b}, err
}

func (failingBatch) Append(int, []int) error { return fmt.Errorf("no room") }

// TestPolicyFailureClosesSandboxes: a policy error mid-run ends the run
// with that error, and every trajectory's sandbox is finished and closed
// before Run returns.
func TestPolicyFailureClosesSandboxes(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	q := script(t, call("query_database", `{"sql": "SELECT 1"}`), "done<|im_end|>")
	var sbs []*sandbox.Sandbox
	r := runner(t, failingAppend{&rollout.Script{Scripts: [][][]int{q}}}, rollout.Config{NumGenerations: 3, MaxCompletionLength: 512, MaxToolCallingIterations: 3})
	r.Rewards = []reward.Func{sandboxReward(func(_ context.Context, sb *sandbox.Sandbox) error {
		sbs = append(sbs, sb)
		return nil
	})}
	if _, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}}); err == nil || !strings.Contains(err.Error(), "no room") {
		t.Fatalf("run error %v", err)
	}
	if len(sbs) != 3 {
		t.Fatalf("%d of 3 trajectories finished", len(sbs))
	}
	for _, sb := range sbs {
		if _, err := sb.Call(context.Background(), "query_database", json.RawMessage(`{"sql": "SELECT 1"}`)); err == nil {
			t.Error("a sandbox is still open after Run returned")
		}
	}
}

// TestCacheFull: a policy whose cache fills up mid-trajectory ends those
// trajectories truncated (token-in, token-out still holds); the run does
// not fail.
func TestCacheFull(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{})
	m, _ := chainPolicyModel(t)
	rec := &recorder{P: &model.Policy{M: m, CompletionSlots: 40}}
	r := runner(t, rec, rollout.Config{NumGenerations: 2, MaxCompletionLength: 400, MaxToolCallingIterations: 5})
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range trajs {
		checkTokenInTokenOut(t, rec.batches[0], i, tr.Trajectory)
		if tr.Error != "" || !tr.Truncated || len(tr.Calls()) < 1 || len(tr.Calls()) > 4 {
			t.Errorf("trajectory %d: error %q truncated %v, %d calls", i, tr.Error, tr.Truncated, len(tr.Calls()))
		}
		for k, turn := range tr.Turns {
			if turn.Text == "" {
				t.Errorf("trajectory %d: turn %d is empty", i, k)
			}
		}
	}
}

// TestForkLost: a trajectory whose PostgreSQL fork loses its connection
// (here a 20 MB row, which the client refuses to read) ends with Error
// saying so; the other trajectories of the group are untouched.
func TestForkLost(t *testing.T) {
	f := newFactory(t, loadFixture(t, customersDir), sandbox.Options{DSN: pgtest.DSN(t)})
	good := script(t, call("query_database", `{"sql": "SELECT COUNT(*) FROM customers"}`), "36 customers.<|im_end|>")
	bad := script(t, call("query_database", `{"sql": "SELECT repeat('x', 20000000)"}`), "never reached<|im_end|>")
	r := runner(t, &rollout.Script{Scripts: [][][]int{bad, good}}, rollout.Config{NumGenerations: 2, MaxCompletionLength: 512, MaxToolCallingIterations: 3})
	trajs, err := r.Run(context.Background(), []rollout.Job{{Task: seedTask(), Factory: f}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(trajs[0].Error, "lost") || len(trajs[0].Turns) != 1 {
		t.Errorf("lost fork: error %q, %d turns", trajs[0].Error, len(trajs[0].Turns))
	}
	if trajs[1].Error != "" || trajs[1].Answer != "36 customers." {
		t.Errorf("other trajectory: error %q answer %q", trajs[1].Error, trajs[1].Answer)
	}
}
