package taskgen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/internal/pgtest"
	"github.com/mcprl/mcprl/look"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/taskgen"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
)

var fixtureDirs = map[string]string{
	"customers": filepath.Join("..", "examples", "fixtures", "customers"),
	"library":   filepath.Join("testdata", "library"),
}

func loadFixture(t *testing.T, name string) *task.Fixture {
	t.Helper()
	fx, err := task.LoadFixture(fixtureDirs[name])
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

func generate(t *testing.T, fx *task.Fixture, opts taskgen.Options) []task.Task {
	t.Helper()
	tasks, err := taskgen.Generate(context.Background(), fx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// demonstrated returns the tasks with a golden trajectory.
func demonstrated(tasks []task.Task) []task.Task {
	var out []task.Task
	for _, tk := range tasks {
		if len(tk.Golden) > 0 {
			out = append(out, tk)
		}
	}
	return out
}

// encode writes tasks as the JSONL that mcprl tasks generate writes.
func encode(t *testing.T, tasks []task.Task) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i := range tasks {
		if err := enc.Encode(&tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// goldenText is the golden trajectory's assistant turns as the policy
// would write them: content, then each call rendered as a <tool_call>.
func goldenText(tk *task.Task) string {
	var b strings.Builder
	for _, m := range tk.Golden {
		if m.Role != "assistant" {
			continue
		}
		b.WriteString(m.Content)
		for _, c := range m.ToolCalls {
			b.WriteString(toolcall.RenderCall(c))
		}
	}
	return b.String()
}

// checkTasks loads the generated tasks strictly with task.Load, then
// replays every golden trajectory through a live sandbox of the fixture
// (its calls over MCP, on dsn's backend) and scores it with the real
// reward functions: all assertions must hold and verifiable must be 1, and
// each recorded observation must be what the sandbox answers. A golden is
// the happy path: one tool call, then the answer. Edge cases have no golden
// and are checked by checkEdge against traps (task id -> the natural first
// query the generator checked to fail).
func checkTasks(t *testing.T, fx *task.Fixture, tasks []task.Task, traps map[string]string, dsn string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(path, encode(t, tasks), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := task.Load(path, task.LoadOptions{Fixtures: map[string]*task.Fixture{fx.Name: fx}})
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != len(tasks) {
		t.Fatalf("loaded %d of %d tasks", len(loaded), len(tasks))
	}
	ctx := context.Background()
	fac, err := sandbox.NewFactory(ctx, fx, sandbox.Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer fac.Close()
	texts, ids := map[string]string{}, map[string]bool{}
	assertions, verifiable := reward.NewAssertions(), reward.Verifiable()
	for i := range loaded {
		tk := &loaded[i]
		if prev, dup := texts[strings.ToLower(tk.Task)]; dup {
			t.Errorf("%s repeats the question of %s: %q", tk.ID, prev, tk.Task)
		}
		texts[strings.ToLower(tk.Task)] = tk.ID
		ids[tk.ID] = true
		lintTask := strings.HasPrefix(tk.Category, "lint")
		if tk.Fixture != fx.Name || tk.Category == "" || len(tk.GroundTruthAssertions) == 0 || reward.IsSQL(tk.GroundTruthAssertions[0]) == lintTask {
			t.Errorf("%s: fixture %q category %q assertions %q", tk.ID, tk.Fixture, tk.Category, tk.GroundTruthAssertions)
		}
		if taskgen.IsEdgeCase(tk.Category) {
			if len(tk.Golden) != 0 {
				t.Errorf("%s: the edge case (%s) has a golden trajectory", tk.ID, tk.Category)
			}
			checkEdge(t, fac, tk, traps[tk.ID])
			continue
		}
		if !slices.Contains(taskgen.Ordinary, tk.Category) {
			t.Errorf("%s: unknown category %q", tk.ID, tk.Category)
		}
		sb, err := fac.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		traj, err := reward.Replay(ctx, sb, goldenText(tk))
		if err != nil {
			t.Fatal(err)
		}
		// The recorded observations are the sandbox's own answers.
		var recorded []string
		for _, m := range tk.Golden {
			if m.Role == "tool" {
				recorded = append(recorded, m.Content)
			}
		}
		calls := traj.Calls()
		if len(calls) != len(recorded) || len(calls) < 1 || len(calls) > 3 {
			t.Errorf("%s: %d calls replayed, %d observations recorded", tk.ID, len(calls), len(recorded))
		}
		for j := 0; j+1 < len(calls); j++ {
			// Every call before the last looks (with Options.TablesShare,
			// first at the tables; then at a column's values or a few
			// rows) or, with Options.LookupShare, finds a key ("SELECT id
			// FROM ... WHERE"), and what it looks at has rows: the golden
			// never follows an empty or failed result.
			look := string(calls[j].Call.Arguments)
			lookup := regexp.MustCompile(`^\{"sql":"SELECT \w+ FROM \w+ WHERE \w+ = `).MatchString(look)
			tables := j == 0 && (strings.Contains(look, "sqlite_master") || strings.Contains(look, "information_schema.tables"))
			if !strings.Contains(look, "SELECT DISTINCT") && !strings.Contains(look, "LIMIT 3") && !lookup && !tables {
				t.Errorf("%s: a golden whose call %d of %d is no look: %s", tk.ID, j+1, len(calls), look)
			}
			if cellOf(calls[j].Text) == "" && strings.Contains(calls[j].Text, "(0 rows)") {
				t.Errorf("%s: the look saw no row: %s", tk.ID, calls[j].Text)
			}
		}
		for j := range calls {
			if calls[j].IsError {
				t.Errorf("%s: golden call %d failed: %s", tk.ID, j, calls[j].Text)
			} else if j < len(recorded) && calls[j].Text != recorded[j] {
				t.Errorf("%s: observation %d differs from the sandbox's:\n got %q\nwant %q", tk.ID, j, recorded[j], calls[j].Text)
			}
		}
		in := &reward.Input{Task: tk, Trajectory: traj, Sandbox: sb}
		for _, f := range []reward.Func{assertions, verifiable} {
			s, err := f.Score(ctx, in)
			if err != nil {
				t.Fatalf("%s: %s: %v", tk.ID, f.Name(), err)
			}
			if s.Value != 1 {
				t.Errorf("%s (%s) %q: golden scores %v on %s:\n%s", tk.ID, tk.Category, tk.Task, s.Value, f.Name(), reward.Breakdown(f.Name(), s))
			}
		}
		// A wrong answer must not pass: the same trajectory without its
		// queries (answer only) fails the assertions.
		bare := &chat.Trajectory{Answer: traj.Answer, Turns: []chat.Turn{{Text: traj.Answer}}}
		if s, err := assertions.Score(ctx, &reward.Input{Task: tk, Trajectory: bare, Sandbox: sb}); err != nil || s.Value != 0 {
			t.Errorf("%s: an answer without queries scores %v (%v)", tk.ID, s.Value, err)
		}
		// callThenAnswer scores one call of tool (its one argument arg) and the golden's answer, in a fork of its own.
		callThenAnswer := func(tool, arg, value string) float64 {
			args, err := json.Marshal(map[string]string{arg: value})
			if err != nil {
				t.Fatal(err)
			}
			csb, err := fac.Fork(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer csb.Close()
			ct, err := reward.Replay(ctx, csb, toolcall.RenderCall(chat.Call{Name: tool, Arguments: args})+traj.Answer)
			if err != nil {
				t.Fatal(err)
			}
			s, err := assertions.Score(ctx, &reward.Input{Task: tk, Trajectory: ct, Sandbox: csb})
			if err != nil {
				t.Fatalf("%s: %v", tk.ID, err)
			}
			return s.Value
		}
		// A lint task names its file: linting another one of the workspace
		// (clean or not) and the golden's answer does not pass.
		if tk.Category == "lint" {
			var file struct {
				Path string `json:"path"`
			}
			if err := json.Unmarshal(calls[len(calls)-1].Call.Arguments, &file); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(fx.WorkspaceDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.IsDir() || e.Name() == file.Path {
					continue
				}
				if v := callThenAnswer(task.ToolRunLinter, "path", e.Name()); v == 1 {
					t.Errorf("%s: linting %s instead of %s scores %v", tk.ID, e.Name(), file.Path, v)
				}
			}
		}
		// A question whose answer is empty carries a witness, and a query
		// that returns nothing whatever it is asked (the constant 0, no
		// rows) with the golden's answer does not pass for the golden.
		if tk.Category == "empty" {
			if len(tk.WitnessSQL) == 0 {
				t.Errorf("%s: a question with an empty answer has no witness_sql", tk.ID)
			}
			for _, q := range []string{"SELECT 0", "SELECT 1 WHERE 1 = 0"} {
				if v := callThenAnswer(task.ToolQueryDatabase, "sql", q); v != 0 {
					t.Errorf("%s: %s and the golden's answer score %v", tk.ID, q, v)
				}
			}
		}
		// A different oracle over the same trajectory fails: the score
		// reads the trajectory's results, it is not 1 whatever they are.
		if a := tk.GroundTruthAssertions[0]; strings.HasPrefix(a, "SELECT COUNT(*) FROM") {
			wrong := *tk
			wrong.GroundTruthAssertions = []string{strings.Replace(a, "COUNT(*)", "COUNT(*) + 1", 1)}
			if s, err := assertions.Score(ctx, &reward.Input{Task: &wrong, Trajectory: traj, Sandbox: sb}); err != nil || s.Value != 0 {
				t.Errorf("%s: golden scores %v (%v) against the oracle %s", tk.ID, s.Value, err, wrong.GroundTruthAssertions[0])
			}
		}
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(ids) != len(tasks) {
		t.Errorf("%d distinct ids for %d tasks", len(ids), len(tasks))
	}
}

// cellOf is the value of a one-cell query observation ("" otherwise).
func cellOf(obs string) string {
	lines := strings.Split(obs, "\n")
	if len(lines) == 4 && lines[3] == "(1 row)" {
		return lines[2]
	}
	return ""
}

var (
	quotedName = regexp.MustCompile(`answer contains "([^"]+)"`)
	fileName   = regexp.MustCompile(`[\w.-]+\.sql`)
)

// checkEdge checks an edge case without a golden trajectory: the
// solution its assertions describe scores 1 live, and the natural first
// attempt (trap: the query an ordinary task's golden would write, or, for
// lint-first, reporting that the file passes) does not.
func checkEdge(t *testing.T, fac *sandbox.Factory, tk *task.Task, trap string) {
	t.Helper()
	ctx := context.Background()
	a := reward.NewAssertions()
	score := func(call chat.Call, answer func(obs string) string) (float64, *chat.Trajectory) {
		t.Helper()
		sb, err := fac.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		traj, err := reward.Replay(ctx, sb, toolcall.RenderCall(call))
		if err != nil {
			t.Fatal(err)
		}
		traj.Answer = answer(traj.Calls()[0].Text)
		s, err := a.Score(ctx, &reward.Input{Task: tk, Trajectory: traj, Sandbox: sb})
		if err != nil {
			t.Fatalf("%s: %v", tk.ID, err)
		}
		return s.Value, traj
	}
	query := func(sql string) chat.Call {
		args, _ := json.Marshal(map[string]string{"sql": sql})
		return chat.Call{Name: "query_database", Arguments: args}
	}
	if tk.Category == "lint-first" {
		m, f := quotedName.FindStringSubmatch(strings.Join(tk.GroundTruthAssertions, " ")), fileName.FindString(tk.Task)
		if m == nil || f == "" {
			t.Fatalf("%s: no file in %q or name in %q", tk.ID, tk.Task, tk.GroundTruthAssertions)
		}
		args, _ := json.Marshal(map[string]string{"path": f})
		lintCall := chat.Call{Name: "run_linter", Arguments: args}
		if v, traj := score(lintCall, func(string) string { return "It refers to " + m[1] + ", which does not exist." }); v != 1 {
			t.Errorf("%s: naming %s after the linter scores %v (%s)", tk.ID, m[1], v, traj.Calls()[0].Text)
		}
		for _, a := range []string{"It refers to " + m[1] + ", which doesn't exist.", "No: " + m[1] + " is wrong.", m[1] + " is not in the database."} {
			if v, _ := score(lintCall, func(string) string { return a }); v != 1 {
				t.Errorf("%s: %q after the linter scores %v", tk.ID, a, v)
			}
		}
		for _, a := range []string{"The file passes.", "The " + m[1] + " exists.", "It agrees with the database: " + m[1] + " is fine."} {
			if v, _ := score(lintCall, func(string) string { return a }); v == 1 {
				t.Errorf("%s: %q scores 1", tk.ID, a)
			}
		}
		// After the linter, a negation without the name earns only the linter's half.
		if v, _ := score(lintCall, func(string) string { return "No, something is wrong." }); v != 0.5 {
			t.Errorf("%s: a negation without %s scores %v after the linter, want 0.5", tk.ID, m[1], v)
		}
		return
	}
	if trap == "" {
		t.Fatalf("%s: no trap recorded for the %s edge case", tk.ID, tk.Category)
	}
	oracle := tk.GroundTruthAssertions[0]
	if v, traj := score(query(oracle), cellOf); v != 1 {
		t.Errorf("%s: running the oracle itself scores %v: %s", tk.ID, v, traj.Calls()[0].Text)
	}
	v, traj := score(query(trap), cellOf)
	if v != 0 {
		t.Errorf("%s (%s) %q: the natural first query %s scores %v", tk.ID, tk.Category, tk.Task, trap, v)
	}
	obs := traj.Calls()[0]
	switch tk.Category {
	case "renamed-column", "look-alike-column", "sql-error":
		if !obs.IsError {
			t.Errorf("%s: %s does not fail: %s", tk.ID, trap, obs.Text)
		}
	case "empty-first":
		if obs.IsError || !strings.HasSuffix(obs.Text, "(0 rows)") {
			t.Errorf("%s: %s does not come back empty: %s", tk.ID, trap, obs.Text)
		}
	case "case-variants", "nulls":
		if obs.IsError {
			t.Errorf("%s: %s fails: %s", tk.ID, trap, obs.Text)
		}
	}
}

func generateTraps(t *testing.T, fx *task.Fixture, opts taskgen.Options) ([]task.Task, map[string]string) {
	t.Helper()
	tasks, traps, err := taskgen.GenerateTraps(context.Background(), fx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tasks, traps
}

// TestGenerateGoldenHolds generates tasks for two differently shaped
// fixtures and checks every one against the live sandbox and the reward:
// every category the fixture offers appears (the lint ones need a
// workspace, which only customers has).
func TestGenerateGoldenHolds(t *testing.T) {
	for _, name := range []string{"customers", "library"} {
		t.Run(name, func(t *testing.T) {
			fx := loadFixture(t, name)
			tasks, traps := generateTraps(t, fx, taskgen.Options{N: 150, Seed: 3})
			if len(tasks) != 150 {
				t.Fatalf("%d tasks, want 150", len(tasks))
			}
			perCat := map[string]int{}
			for _, tk := range tasks {
				perCat[tk.Category]++
			}
			for _, c := range taskgen.Categories {
				if perCat[c] == 0 && (fx.WorkspaceDir != "" || !strings.HasPrefix(c, "lint")) {
					t.Errorf("no %s task (%v)", c, perCat)
				}
			}
			t.Logf("%s: %v", name, perCat)
			checkTasks(t, fx, tasks, traps, "")
		})
	}
}

// TestGenerateEdgeCases checks the edge cases the library fixture holds:
// its genre column stores 'fiction', 'Fiction' and 'fiction ', so the
// variant task counts across spellings where the exact match does not;
// tables asked about by another word fail first; and edge cases never carry
// a golden trajectory, so SFT cannot train on them.
func TestGenerateEdgeCases(t *testing.T) {
	fx := loadFixture(t, "library")
	tasks, traps := generateTraps(t, fx, taskgen.Options{N: 400, Seed: 5})
	perCat := map[string]int{}
	found := false
	for _, tk := range tasks {
		perCat[tk.Category]++
		if taskgen.IsEdgeCase(tk.Category) != (len(tk.Golden) == 0) {
			t.Errorf("%s (%s): golden of %d messages", tk.ID, tk.Category, len(tk.Golden))
		}
		if tk.GroundTruthAssertions[0] == "SELECT COUNT(*) FROM books WHERE LOWER(TRIM(genre)) = 'fiction'" && tk.Category == "case-variants" {
			found = true
			if !strings.Contains(traps[tk.ID], "genre = ") {
				t.Errorf("%s: trap %q", tk.ID, traps[tk.ID])
			}
		}
		if tk.Category == "sql-error" {
			for _, table := range []string{"members", "books", "loans"} {
				if strings.Contains(traps[tk.ID], "FROM "+table) {
					t.Errorf("%s: the sql-error trap names the real table: %q", tk.ID, traps[tk.ID])
				}
			}
		}
	}
	if !found {
		t.Error("no case-variants task counts the fiction books across spellings")
	}
	for _, c := range []string{"case-variants", "empty-first", "nulls", "renamed-column", "sql-error"} {
		if perCat[c] < 3 {
			t.Errorf("%d %s tasks (%v)", perCat[c], c, perCat)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	fx := loadFixture(t, "customers")
	a := encode(t, generate(t, fx, taskgen.Options{N: 60, Seed: 7}))
	b := encode(t, generate(t, fx, taskgen.Options{N: 60, Seed: 7}))
	c := encode(t, generate(t, fx, taskgen.Options{N: 60, Seed: 8}))
	if !bytes.Equal(a, b) {
		t.Error("the same seed gave different tasks")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds gave the same tasks")
	}
}

// TestGeneratePostgres generates on PostgreSQL and checks the tasks there.
func TestGeneratePostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	fx := loadFixture(t, "library")
	tasks, traps := generateTraps(t, fx, taskgen.Options{N: 60, Seed: 2, DSN: dsn})
	if len(tasks) != 60 {
		t.Fatalf("%d tasks", len(tasks))
	}
	checkTasks(t, fx, tasks, traps, dsn)
}

// TestGenerateOddities runs the generator on a fixture of awkward shapes
// (keyword table name, self-referencing foreign key, no primary key,
// timestamps, quotes in values, an empty table) and checks every task.
func TestGenerateOddities(t *testing.T) {
	fx, err := task.LoadFixture(filepath.Join("testdata", "oddities"))
	if err != nil {
		t.Fatal(err)
	}
	tasks, traps := generateTraps(t, fx, taskgen.Options{N: 160, Seed: 1})
	if len(tasks) < 80 {
		t.Fatalf("only %d tasks", len(tasks))
	}
	selfJoin := false
	for _, tk := range tasks {
		if tk.Category == "join" && strings.Contains(tk.GroundTruthAssertions[0], "manager_id") {
			selfJoin = true
		}
	}
	if !selfJoin {
		t.Error("no join along the self-referencing foreign key")
	}
	checkTasks(t, fx, tasks, traps, "")
}

// TestGoldenThroughRollout runs the generated golden trajectories the way
// SFT does (task.GoldenTurns, tokenized, replayed by a scripted policy in
// rollout.Runner against live sandboxes, token in/token out) and scores
// each finished trajectory with verifiable: all must score 1.
func TestGoldenThroughRollout(t *testing.T) {
	fx := loadFixture(t, "library")
	tasks := demonstrated(generate(t, fx, taskgen.Options{N: 96, Seed: 11}))
	ctx := context.Background()
	fac, err := sandbox.NewFactory(ctx, fx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fac.Close()
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	var (
		scripts [][][]int
		jobs    []rollout.Job
		iters   int
	)
	for i := range tasks {
		turns, err := task.GoldenTurns(&tasks[i], toolcall.RenderCall)
		if err != nil {
			t.Fatal(err)
		}
		iters = max(iters, len(turns))
		var script [][]int
		for _, s := range turns {
			script = append(script, tok.Encode(s))
		}
		scripts = append(scripts, script)
		jobs = append(jobs, rollout.Job{Task: &tasks[i], Factory: fac})
	}
	v := reward.Verifiable()
	r := &rollout.Runner{
		Policy: &rollout.Script{Scripts: scripts}, Tokenizer: tok, Template: tpl,
		Config:  rollout.Config{NumGenerations: 1, MaxCompletionLength: 4096, MaxToolCallingIterations: iters},
		Rewards: []reward.Func{v},
	}
	results, err := r.Run(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range results {
		if res.Error != "" || res.Truncated {
			t.Errorf("%s: error %q truncated %v", tasks[i].ID, res.Error, res.Truncated)
		}
		if len(res.Scores) != 1 || res.Errs[0] != nil {
			t.Errorf("%s: not scored: %v", tasks[i].ID, res.Errs)
			continue
		}
		if s := res.Scores[0]; s.Value != 1 {
			t.Errorf("%s: %v\n%s", tasks[i].ID, s.Value, reward.Breakdown(v.Name(), s))
		}
	}
}

// TestPortableAssertions replays tasks generated on SQLite in a PostgreSQL
// sandbox: the oracles and golden queries are portable SQL, so every
// assertion still holds there (only the schema look-up of synonym tasks is
// SQLite's own, and it is not what the assertions read).
func TestPortableAssertions(t *testing.T) {
	dsn := pgtest.DSN(t)
	fx := loadFixture(t, "customers")
	tasks := demonstrated(generate(t, fx, taskgen.Options{N: 120, Seed: 3}))
	ctx := context.Background()
	fac, err := sandbox.NewFactory(ctx, fx, sandbox.Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer fac.Close()
	a := reward.NewAssertions()
	for i := range tasks {
		tk := &tasks[i]
		sb, err := fac.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		traj, err := reward.Replay(ctx, sb, goldenText(tk))
		if err != nil {
			t.Fatal(err)
		}
		s, err := a.Score(ctx, &reward.Input{Task: tk, Trajectory: traj, Sandbox: sb})
		if err != nil {
			t.Fatal(err)
		}
		if s.Value != 1 {
			t.Errorf("%s: %v on PostgreSQL\n%s", tk.ID, s.Value, reward.Breakdown(a.Name(), s))
		}
		sb.Close()
	}
}

// TestGenerateNeedsQueryTool refuses a fixture whose sandbox has no
// query_database: every golden trajectory would call a tool it lacks.
func TestGenerateNeedsQueryTool(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nodb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"schema.sql": "CREATE TABLE t (id INTEGER PRIMARY KEY);", "sandbox.yaml": "tools:\n  - run_linter\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fx, err := task.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := taskgen.Generate(context.Background(), fx, taskgen.Options{N: 5}); err == nil || !strings.Contains(err.Error(), "query_database") {
		t.Errorf("err = %v", err)
	}
}

// The share of two-step goldens (look, then query) is an option: none at
// 0, every ordinary task but the lint ones at 1, about half by default;
// the questions drawn do not depend on it.
func TestGenerateInspectShare(t *testing.T) {
	fx := loadFixture(t, "customers")
	twoStep := func(share *float64) (int, int, []string) {
		tasks := generate(t, fx, taskgen.Options{N: 120, Seed: 3, InspectShare: share})
		n, two := 0, 0
		var questions []string
		for _, tk := range tasks {
			questions = append(questions, tk.Task)
			if len(tk.Golden) == 0 || tk.Category == "lint" {
				continue
			}
			n++
			calls := 0
			for _, m := range tk.Golden {
				calls += len(m.ToolCalls)
			}
			if calls == 2 {
				two++
			}
		}
		return two, n, questions
	}
	zero, one := 0.0, 1.0
	two0, n0, q0 := twoStep(&zero)
	two1, n1, q1 := twoStep(&one)
	twoD, nD, qD := twoStep(nil)
	if two0 != 0 || two1 != n1 || n1 == 0 {
		t.Errorf("share 0: %d of %d two-step; share 1: %d of %d", two0, n0, two1, n1)
	}
	if f := float64(twoD) / float64(nD); f < 0.3 || f > 0.7 {
		t.Errorf("default share: %d of %d two-step (%.2f), want about %.1f", twoD, nD, f, taskgen.DefaultInspectShare)
	}
	if strings.Join(q0, "\n") != strings.Join(q1, "\n") || strings.Join(q0, "\n") != strings.Join(qD, "\n") {
		t.Error("the share changed which questions were drawn")
	}
	bad := 1.5
	if _, err := taskgen.Generate(context.Background(), fx, taskgen.Options{N: 5, InspectShare: &bad}); err == nil {
		t.Error("share 1.5 accepted")
	}
}

// TestGenerateLookupShare: with Options.LookupShare 1 every question about
// one named parent row that has a lookup gets the two-step golden, whose
// second query uses the key the first returned live (its observation), and
// which replays and scores as every golden does; share 0 leaves the tasks
// byte for byte as without the option; no share changes which questions are
// drawn, and a share outside [0, 1] is refused.
func TestGenerateLookupShare(t *testing.T) {
	for _, name := range []string{"customers", "library"} {
		t.Run(name, func(t *testing.T) {
			fx := loadFixture(t, name)
			zero := 0.0
			plain := generate(t, fx, taskgen.Options{N: 150, Seed: 3, InspectShare: &zero})
			none := generate(t, fx, taskgen.Options{N: 150, Seed: 3, InspectShare: &zero, LookupShare: 0})
			all, traps := generateTraps(t, fx, taskgen.Options{N: 150, Seed: 3, InspectShare: &zero, LookupShare: 1})
			if !bytes.Equal(encode(t, plain), encode(t, none)) {
				t.Error("LookupShare 0 changed the tasks")
			}
			lookups := 0
			for i, tk := range all {
				if tk.Task != plain[i].Task {
					t.Fatalf("task %d: %q with lookups, %q without: the share changed the questions", i, tk.Task, plain[i].Task)
				}
				var calls []string
				var observed []string
				for _, m := range tk.Golden {
					for _, c := range m.ToolCalls {
						var args struct{ SQL string }
						if err := json.Unmarshal(c.Arguments, &args); err != nil {
							t.Fatal(err)
						}
						calls = append(calls, args.SQL)
					}
					if m.Role == "tool" {
						observed = append(observed, m.Content)
					}
				}
				if len(calls) != 2 {
					continue
				}
				lookups++
				// The key is the first result's one value, the line under its header, which the second query
				// compares with.
				key := cellOf(observed[0])
				if key == "" || tk.Category != "join" || !strings.Contains(calls[1], "= "+key) && !strings.Contains(calls[1], "= '"+key+"'") || strings.Contains(calls[1], "JOIN") {
					t.Errorf("%s (%s): first %q returned %q, then %q", tk.ID, tk.Category, calls[0], observed[0], calls[1])
				}
			}
			t.Logf("%s: %d of %d tasks look a key up first", name, lookups, len(all))
			if lookups == 0 {
				t.Fatal("no lookup golden")
			}
			checkTasks(t, fx, all, traps, "")
		})
	}
	bad := -0.5
	if _, err := taskgen.Generate(context.Background(), loadFixture(t, "customers"), taskgen.Options{N: 5, LookupShare: bad}); err == nil {
		t.Error("share -0.5 accepted")
	}
}

// TestGenerateTablesShare: with Options.TablesShare 1 every ordinary golden
// but lint's first lists the database's tables, in the backend's own SQL, and
// sees every table of the fixture; the goldens replay and score as every
// golden does; share 0 leaves the tasks byte for byte as without the
// option; no share changes which questions are drawn, and a share outside
// [0, 1] is refused.
func TestGenerateTablesShare(t *testing.T) {
	for _, tc := range []struct{ name, fixture, dsn, listing string }{
		{"sqlite", "library", "", look.SQLiteTables},
		{"customers", "customers", "", look.SQLiteTables},
		{"postgres", "library", "postgres", look.PostgresTables},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := ""
			if tc.dsn != "" {
				dsn = pgtest.DSN(t)
			}
			fx := loadFixture(t, tc.fixture)
			opts := taskgen.Options{N: 60, Seed: 4, DSN: dsn}
			plain := generate(t, fx, opts)
			opts.TablesShare = 0
			if none := generate(t, fx, opts); !bytes.Equal(encode(t, plain), encode(t, none)) {
				t.Error("TablesShare 0 changed the tasks")
			}
			opts.TablesShare = 1
			all, traps := generateTraps(t, fx, opts)
			tables := fixtureTables(t, fx)
			listed := 0
			for i, tk := range all {
				if tk.Task != plain[i].Task {
					t.Fatalf("task %d: %q listing the tables, %q without: the share changed the questions", i, tk.Task, plain[i].Task)
				}
				if len(tk.Golden) == 0 || tk.Category == "lint" {
					continue
				}
				var first struct{ SQL string }
				if err := json.Unmarshal(tk.Golden[0].ToolCalls[0].Arguments, &first); err != nil {
					t.Fatal(err)
				}
				if first.SQL != tc.listing {
					t.Errorf("%s (%s): first call %q, want the table listing", tk.ID, tk.Category, first.SQL)
					continue
				}
				listed++
				if next := tk.Golden[2].Content; strings.HasPrefix(next, "First") {
					t.Errorf("%s: the step after the listing says %q", tk.ID, next)
				}
				seen := strings.Fields(tk.Golden[1].Content)
				for _, table := range tables {
					if !slices.Contains(seen, table) {
						t.Errorf("%s: the listing %q misses table %s", tk.ID, tk.Golden[1].Content, table)
					}
				}
			}
			if listed == 0 {
				t.Fatal("no golden lists the tables")
			}
			checkTasks(t, fx, all, traps, dsn)
		})
	}
	for _, bad := range []float64{-0.5, 1.5} {
		if _, err := taskgen.Generate(context.Background(), loadFixture(t, "customers"), taskgen.Options{N: 5, TablesShare: bad}); err == nil {
			t.Errorf("share %g accepted", bad)
		}
	}
}

// fixtureTables is the names of the tables fx's schema.sql creates.
func fixtureTables(t *testing.T, fx *task.Fixture) []string {
	t.Helper()
	var names []string
	for _, m := range regexp.MustCompile(`(?i)CREATE TABLE\s+(?:IF NOT EXISTS\s+)?"?(\w+)"?`).FindAllStringSubmatch(fx.SchemaSQL, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("fixture %s: no CREATE TABLE in its schema", fx.Name)
	}
	return names
}

// TestGenerateSystemPrompt: Options.SystemPrompt is every task's; without
// it no task has one.
func TestGenerateSystemPrompt(t *testing.T) {
	fx := loadFixture(t, "customers")
	for _, sp := range []string{"", "You query the customers database."} {
		for _, tk := range generate(t, fx, taskgen.Options{N: 10, Seed: 1, SystemPrompt: sp}) {
			if tk.SystemPrompt != sp {
				t.Fatalf("task %s: system prompt %q, want %q", tk.ID, tk.SystemPrompt, sp)
			}
		}
	}
}
