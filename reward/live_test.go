package reward

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/internal/pgtest"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

var _ Sandbox = (*sandbox.Sandbox)(nil)
var _ Caller = (*sandbox.Sandbox)(nil)

// example loads the repository's example fixture and tasks.
func example(t *testing.T) (*task.Fixture, map[string]*task.Task) {
	t.Helper()
	fx, err := task.LoadFixture(filepath.Join("..", "examples", "fixtures", "customers"))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := task.Load(filepath.Join("..", "examples", "customers", "tasks.jsonl"), task.LoadOptions{Fixtures: map[string]*task.Fixture{fx.Name: fx}})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*task.Task{}
	for i := range ts {
		m[ts[i].ID] = &ts[i]
	}
	return fx, m
}

// backends runs f against SQLite and PostgreSQL.
func backends(t *testing.T, f func(t *testing.T, fac *sandbox.Factory)) {
	fx, _ := example(t)
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			dsn := ""
			if b == "postgres" {
				dsn = pgtest.DSN(t)
			}
			fac, err := sandbox.NewFactory(context.Background(), fx, sandbox.Options{DSN: dsn})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := fac.Close(); err != nil {
					t.Error(err)
				}
			})
			f(t, fac)
		})
	}
}

func q(sql string) string {
	return toolcall.RenderCall(chat.Call{Name: "query_database", Arguments: []byte(fmt.Sprintf(`{"sql": %q}`, sql))})
}

func lint(path string) string {
	return toolcall.RenderCall(chat.Call{Name: "run_linter", Arguments: []byte(fmt.Sprintf(`{"path": %q}`, path))})
}

// scoreLive replays text in a fresh fork and scores it with f.
func scoreLive(t *testing.T, fac *sandbox.Factory, tk *task.Task, f Func, text string) Score {
	t.Helper()
	return scoreEdited(t, fac, tk, f, text, func(*chat.Trajectory) {})
}

// scoreEdited replays text in a fresh fork, lets edit mark how the trajectory ended, and scores it with f.
func scoreEdited(t *testing.T, fac *sandbox.Factory, tk *task.Task, f Func, text string, edit func(*chat.Trajectory)) Score {
	t.Helper()
	ctx := context.Background()
	sb, err := fac.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	traj, err := Replay(ctx, sb, text)
	if err != nil {
		t.Fatal(err)
	}
	edit(traj)
	s, err := f.Score(ctx, &Input{Task: tk, Trajectory: traj, Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAssertionsLive(t *testing.T) {
	_, tasks := example(t)
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		a := NewAssertions()
		cases := []struct {
			task, text string
			want       float64
		}{
			// The user's task: the count oracle and exit_code == 0.
			{"customers-inactive-001", q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'") + lint("inactive_customers.sql") + "There are 7 inactive customers.", 1},
			// Another query with the same result (alias, different aggregate) holds too.
			{"customers-inactive-001", q("SELECT COUNT(id) AS n FROM customers WHERE status='inactive'") + lint("inactive_customers.sql"), 1},
			// A broken file: the linter exits non-zero.
			{"customers-inactive-001", q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'") + lint("cleanup_inactive.sql"), 0.5},
			// The wrong count (13 variants) stated and queried.
			{"customers-inactive-001", q("SELECT COUNT(*) FROM customers WHERE LOWER(TRIM(status)) = 'inactive'") + "13 inactive customers.", 0},
			// Answering without querying: the right number, but never surfaced by a query.
			{"customers-inactive-001", "There are 7 inactive customers.", 0},
			// One cell in the final answer after a query whose result differs in shape.
			{"customers-inactive-variants-002", q("SELECT id FROM customers WHERE LOWER(TRIM(status)) = 'inactive'") + "So 13 customers are inactive.", 1},
			{"customers-inactive-variants-002", q("SELECT id FROM customers WHERE LOWER(TRIM(status)) = 'inactive'") + "So 130 customers are inactive.", 0},
			// Order-insensitive without ORDER BY... and order-sensitive with it.
			{"customers-flag-mismatch-008", q("SELECT id FROM customers WHERE is_active = TRUE AND LOWER(TRIM(status)) = 'inactive' ORDER BY id"), 1},
			{"customers-flag-mismatch-008", q("SELECT id FROM customers WHERE is_active = TRUE AND LOWER(TRIM(status)) = 'inactive' ORDER BY id DESC"), 0},
			// Type tolerance: a NUMERIC sum stated as text.
			// The stated sum holds where a result shows it among its cells...
			{"customers-inactive-orders-006", q("SELECT 'inactive' AS status, ROUND(SUM(o.total), 2) AS total FROM orders o JOIN customers c ON c.id = o.customer_id WHERE LOWER(TRIM(c.status)) = 'inactive'") + "Orders of inactive customers total 3,915.70.", 1},
			// ...and is a guess where no result shows it, however right.
			{"customers-inactive-orders-006", q("SELECT COUNT(*) FROM customers") + "Orders of inactive customers total 3,915.70.", 0},
			{"customers-inactive-orders-006", q("SELECT CAST(ROUND(SUM(o.total), 2) AS TEXT) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE LOWER(TRIM(c.status)) = 'inactive'"), 1},
			// Expressions: exit_code != 0 and called("run_linter").
			{"customers-lint-broken-005", lint("cleanup_inactive.sql"), 1},
			{"customers-lint-broken-005", lint("inactive_customers.sql"), 0.5},
			{"customers-lint-broken-005", "", 0},
			// A task that asks for a change: its state_assertions (3) hold on
			// the fork after the UPDATE, and the question's oracle runs there.
			{"customers-normalize-status-004", q("UPDATE customers SET status = 'inactive' WHERE LOWER(TRIM(status)) = 'inactive' AND status <> 'inactive'") + q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'"), 1},
			// The change made, but the count queried before it: the state holds, the answer does not.
			{"customers-normalize-status-004", q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'") + q("UPDATE customers SET status = 'inactive' WHERE LOWER(TRIM(status)) = 'inactive' AND status <> 'inactive'"), 0.75},
		}
		for i, c := range cases {
			tk := tasks[c.task]
			if tk == nil {
				t.Fatalf("no task %s", c.task)
			}
			s := scoreLive(t, fac, tk, a, c.text)
			if s.Value != c.want {
				t.Errorf("case %d (%s): %v, want %v: %s\n%+v", i, c.task, s.Value, c.want, s.Reason, s.Checks)
			}
			for _, ch := range s.Checks {
				if !ch.Held && ch.Why == "" {
					t.Errorf("case %d: a failed check must say why: %+v", i, ch)
				}
			}
		}
	})
}

// TestAssertionsLintedFile: exit_code reads whichever file was linted
// last, so "exit_code == 0" held after linting any clean file of the
// workspace; exit_code_of reads the file the task names (its path cleaned)
// and fails the assertion where that file was never linted, whatever the
// comparison (a never-linted file does not "exit non-zero").
func TestAssertionsLintedFile(t *testing.T) {
	clean := &task.Task{ID: "lint-report", Fixture: "customers", Task: "Check report.json with run_linter.",
		GroundTruthAssertions: []string{`called("run_linter")`, `exit_code_of("report.json") == 0`}}
	broken := &task.Task{ID: "lint-cleanup", Fixture: "customers", Task: "Lint cleanup_inactive.sql.",
		GroundTruthAssertions: []string{`exit_code_of("cleanup_inactive.sql") != 0`}}
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		a := NewAssertions()
		for _, c := range []struct {
			name string
			task *task.Task
			text string
			want float64
		}{
			{"the file", clean, lint("report.json") + "report.json passes.", 1},
			{"the file, written ./", clean, lint("./report.json") + "It passes.", 1},
			{"another clean file", clean, lint("inactive_customers.sql") + "report.json passes.", 0.5},
			{"the file, then a broken one", clean, lint("report.json") + lint("cleanup_inactive.sql") + "report.json passes.", 1},
			{"nothing linted", clean, "report.json passes.", 0},
			{"the broken file", broken, lint("cleanup_inactive.sql") + "It fails.", 1},
			{"a clean file instead", broken, lint("inactive_customers.sql") + "It fails.", 0},
			{"another broken file? none: a missing one", broken, lint("missing.sql") + "It fails.", 0},
			{"nothing linted, broken", broken, "It fails.", 0},
		} {
			s := scoreLive(t, fac, c.task, a, c.text)
			if s.Value != c.want {
				t.Errorf("%s: %v, want %v: %+v", c.name, s.Value, c.want, s.Checks)
			}
		}
	})
}

// TestGuardsAgainstRewardHacking scores the user's task with the
// verifiable composition (format 0.3, tool_selection 0.3, execution 0.4,
// hallucination veto -0.5) on live sandboxes: an honest trajectory scores
// 1; skipping tools, answering without querying, stuffing the seed's
// keyword, repeating a call and spamming calls all score far lower.
func TestGuardsAgainstRewardHacking(t *testing.T) {
	_, tasks := example(t)
	tk := tasks["customers-inactive-001"]
	count := q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'")
	good := count + lint("inactive_customers.sql") + "There are 7 inactive customers and the schema lints clean."
	var spam strings.Builder
	for i := 0; i < 20; i++ {
		spam.WriteString(q(fmt.Sprintf("SELECT COUNT(*) FROM customers WHERE id > %d", i)))
	}
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		v := Verifiable()
		honest := scoreLive(t, fac, tk, v, good)
		if honest.Value < 0.999 {
			t.Fatalf("honest trajectory scored %v: %s", honest.Value, Breakdown(v.Name(), honest))
		}
		hacks := []struct {
			name, text string
			max        float64
		}{
			{"skips tools", "There are 7 inactive customers.", 0},
			{"answers without querying", lint("inactive_customers.sql") + "There are 7 inactive customers.", 0.65},
			{"stuffs the seed's keyword", q("SELECT 'inactive'") + "Done.", 0.45},
			{"repeats a call to farm", good + strings.Repeat(count, 9), 0.2},
			{"spams calls", spam.String() + lint("inactive_customers.sql") + count + "7", 0.4},
			{"malformed calls", strings.Repeat("<tool_call>{\"name\": \"query_database\"</tool_call>", 3) + "7", 0},
		}
		for _, h := range hacks {
			s := scoreLive(t, fac, tk, v, h.text)
			t.Logf("%-26s %.3f (honest %.3f)", h.name, s.Value, honest.Value)
			if s.Value > h.max+1e-9 || s.Value > 0.5*honest.Value+0.15 {
				t.Errorf("%s: scored %v (max %v, honest %v): %s", h.name, s.Value, h.max, honest.Value, Breakdown(v.Name(), s))
			}
		}
		// The seed would have paid the keyword stuffing fully.
		if r := ComputeMCPReward(q("SELECT 'inactive'"), DefaultMCPRewardConfig()); r.Value != 1.0 {
			t.Errorf("seed on keyword stuffing: %v", r.Value)
		}
		// A hallucinated tool is -0.5 whatever else was right, as in the user's function.
		bad := good + toolcall.RenderCall(chat.Call{Name: "drop_database", Arguments: []byte(`{}`)})
		if s := scoreLive(t, fac, tk, v, bad); s.Value != -0.5 || s.Reason != "vetoed by hallucination" {
			t.Errorf("hallucinated tool: %v (%s)", s.Value, s.Reason)
		}
	})
}

// TestGoldenTrajectoriesHold replays the golden trajectory of every example
// task (its assistant turns, calls rendered as the model would write them)
// and checks that all its assertions hold and verifiable gives 1, on both
// backends: the assertion semantics agree with the tasks' authors.
func TestGoldenTrajectoriesHold(t *testing.T) {
	_, tasks := example(t)
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		for id, tk := range tasks {
			if len(tk.Golden) == 0 {
				continue
			}
			var text strings.Builder
			for _, m := range tk.Golden {
				if m.Role != "assistant" {
					continue
				}
				text.WriteString(m.Content)
				for _, c := range m.ToolCalls {
					text.WriteString(toolcall.RenderCall(c))
				}
			}
			for _, f := range []Func{NewAssertions(), Verifiable()} {
				if s := scoreLive(t, fac, tk, f, text.String()); s.Value != 1 {
					t.Errorf("%s golden, %s: %v\n%s", id, f.Name(), s.Value, Breakdown(f.Name(), s))
				}
			}
		}
	})
}

// TestExampleEmptyAnswersWitnessed: every SQL oracle of the repository's
// task files whose answer is empty (no rows, or 0) on its fixture carries
// witness_sql, and on both backends that copy of the data gives it an
// answer (else SELECT 0 would score as the honest query; see
// TestAssertionsEmptyAnswer).
func TestExampleEmptyAnswersWitnessed(t *testing.T) {
	fixtures := map[string]*task.Fixture{}
	for _, name := range []string{"customers", "library"} {
		fx, err := task.LoadFixture(filepath.Join("..", "examples", "fixtures", name))
		if err != nil {
			t.Fatal(err)
		}
		fixtures[name] = fx
	}
	var tasks []task.Task
	for _, f := range []string{"customers/tasks.jsonl", "customers/quick_tasks.jsonl", "experiment/heldout_tasks.jsonl", "trl/sft_tasks.jsonl"} {
		ts, err := task.Load(filepath.Join("..", "examples", f), task.LoadOptions{Fixtures: fixtures})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, ts...)
	}
	empty := func(r *sqldb.Result) bool {
		return len(r.Rows) == 0 || len(r.Rows) == 1 && len(r.Rows[0]) == 1 && canon(r.Rows[0][0]) == "0"
	}
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			dsn := ""
			if b == "postgres" {
				dsn = pgtest.DSN(t)
			}
			ctx := context.Background()
			witnessed := 0
			for name, fx := range fixtures {
				tpl, err := sqldb.NewTemplate(ctx, fx.SchemaSQL, fx.DataSQL, sqldb.Options{DSN: dsn})
				if err != nil {
					t.Fatal(err)
				}
				defer tpl.Close()
				for _, tk := range tasks {
					if tk.Fixture != name || len(tk.StateAssertions) > 0 {
						continue
					}
					for _, src := range tk.GroundTruthAssertions {
						if !IsSQL(src) {
							continue
						}
						res, err := tpl.Oracle(ctx, src)
						if err != nil {
							t.Fatalf("%s: %v", tk.ID, err)
						}
						if !empty(res) {
							continue
						}
						if len(tk.WitnessSQL) == 0 {
							t.Errorf("%s: %q answers %v and the task has no witness_sql", tk.ID, src, res.Rows)
							continue
						}
						w, err := tpl.Witnessed(ctx, tk.WitnessSQL, src, nil)
						if err != nil || w[0] == nil || empty(w[0]) {
							t.Errorf("%s: on the witness_sql's copy %q gives %v (%v), want an answer", tk.ID, src, w, err)
						}
						witnessed++
					}
				}
			}
			if witnessed < 4 {
				t.Errorf("%d witnessed oracles; the task files have at least 4 (the test looks at the wrong files?)", witnessed)
			}
		})
	}
}

// TestAssertionsCoincidence: on the customers fixture 'pending' and
// 'suspended' both count 2 customers. A query on the wrong one matches the
// oracle's value live, but not on copies of the data with rows removed, so
// the assertion does not hold; the right query, written another way, does,
// and so does an answer that counted the right listing's rows.
func TestAssertionsCoincidence(t *testing.T) {
	tk := &task.Task{ID: "pending-count", Fixture: "customers", Task: "How many customers have status 'pending'?",
		GroundTruthAssertions: []string{"SELECT COUNT(*) FROM customers WHERE status = 'pending'"}}
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		a := NewAssertions()
		for i, c := range []struct {
			text string
			want float64
			why  string
		}{
			{q("SELECT COUNT(*) FROM customers WHERE status = 'suspended'") + "2 customers.", 0, "coincidence"},
			{q("SELECT id FROM customers WHERE status = 'suspended'") + "2 customers.", 0, "coincidence"},
			{q("SELECT COUNT(*) FROM customers WHERE status = 'suspended'") + q("SELECT COUNT(id) FROM customers WHERE 'pending' = status") + "2.", 1, "oracle's rows"},
			{q("SELECT id, email FROM customers WHERE status = 'pending'") + "2 customers are pending.", 1, "shows"},
		} {
			s := scoreLive(t, fac, tk, a, c.text)
			if s.Value != c.want || len(s.Checks) != 1 || !strings.Contains(s.Checks[0].Why, c.why) {
				t.Errorf("case %d: %v, want %v with %q: %+v", i, s.Value, c.want, c.why, s.Checks)
			}
		}
	})
}

// TestAssertionsEmptyAnswer: no customer is in Japan, so any query that
// returns nothing, or the constant 0, agrees with the oracle live and on
// every thinned copy, and scores as the honest query. The task's
// witness_sql makes a copy where a customer is in Japan: only the queries
// that ask the question still agree there. A witness_sql that leaves the
// answer empty is the task's error.
func TestAssertionsEmptyAnswer(t *testing.T) {
	list := &task.Task{ID: "japan-ids", Fixture: "customers", Task: "Which customers are in Japan? Give their ids.",
		GroundTruthAssertions: []string{"SELECT id FROM customers WHERE country = 'JP'"}}
	count := &task.Task{ID: "japan-count", Fixture: "customers", Task: "How many customers are in Japan?",
		GroundTruthAssertions: []string{"SELECT COUNT(*) FROM customers WHERE country = 'JP'"}}
	witness := []string{"UPDATE customers SET country = 'JP' WHERE id = (SELECT MIN(id) FROM customers)"}
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		a := NewAssertions()
		for _, c := range []struct {
			name string
			task *task.Task
			text string
			held bool // with witness_sql; without it every case holds
		}{
			{"honest list", list, q("SELECT id FROM customers WHERE country = 'JP'") + "None: no customer is in Japan.", true},
			{"the same question another way", list, q("SELECT c.id FROM customers AS c WHERE UPPER(c.country) = 'JP' ORDER BY c.id") + "No customer is in Japan.", true},
			{"the wrong column", list, q("SELECT id FROM customers WHERE full_name = 'JP'") + "None.", false},
			{"a constant that returns nothing", list, q("SELECT 1 WHERE 1 = 0") + "None.", false},
			{"honest count", count, q("SELECT COUNT(*) FROM customers WHERE country = 'JP'") + "There are 0 customers in Japan.", true},
			{"SELECT 0", count, q("SELECT 0") + "There are 0 customers in Japan.", false},
			{"a count on the wrong column", count, q("SELECT COUNT(*) FROM customers WHERE email = 'JP'") + "0 customers.", false},
			{"counting an empty listing", count, q("SELECT id FROM customers WHERE 1 = 0") + "0 customers.", false},
		} {
			bare := scoreLive(t, fac, c.task, a, c.text)
			if bare.Value != 1 {
				t.Errorf("%s without witness_sql: %v (%s), want 1 (the hole witness_sql closes)", c.name, bare.Value, bare.Reason)
			}
			tk := *c.task
			tk.WitnessSQL = witness
			s := scoreLive(t, fac, &tk, a, c.text)
			if got := s.Value == 1; got != c.held || len(s.Checks) != 1 {
				t.Errorf("%s with witness_sql: %v, want held %v: %+v", c.name, s.Value, c.held, s.Checks)
			}
			if !c.held && !strings.Contains(s.Checks[0].Why, "witness_sql") {
				t.Errorf("%s: the reason does not name witness_sql: %s", c.name, s.Checks[0].Why)
			}
		}
		bad := *list
		bad.WitnessSQL = []string{"UPDATE nowhere SET x = 1"}
		sb, err := fac.Fork(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		traj, err := Replay(context.Background(), sb, q("SELECT id FROM customers WHERE country = 'JP'")+"None.")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Score(context.Background(), &Input{Task: &bad, Trajectory: traj, Sandbox: sb}); err == nil || !strings.Contains(err.Error(), "witness_sql") {
			t.Errorf("a witness_sql that fails: err %v, want one naming witness_sql", err)
		}
	})
}

// TestAssertionsShotgun: an answer that lists every number from 0 to 40
// states any count's value, and a listing (every id, every column of a
// table) shows most counts among its cells, on the data and on copies with
// rows removed alike: before cellsAt, such a trajectory held the count's
// oracle on PostgreSQL. A value counts only in a cell its row's text
// identifies, as a GROUP BY's label does, and there it still holds.
func TestAssertionsShotgun(t *testing.T) {
	_, tasks := example(t)
	var nums []string
	for i := 0; i <= 40; i++ {
		nums = append(nums, fmt.Sprint(i))
	}
	shotgun := "The answer is one of " + strings.Join(nums, ", ") + "."
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		a := NewAssertions()
		for _, c := range []struct {
			task, text string
			want       float64
		}{
			{"customers-inactive-variants-002", q("SELECT id FROM customers") + shotgun, 0},
			{"customers-inactive-variants-002", q("SELECT * FROM customers") + shotgun, 0},
			{"customers-inactive-variants-002", q("SELECT * FROM orders") + shotgun, 0},
			{"customers-inactive-variants-002", q("SELECT id, status FROM customers") + shotgun, 0},
			{"customers-inactive-001", q("SELECT * FROM customers") + shotgun, 0},
			{"customers-inactive-001", q("SELECT * FROM orders") + shotgun, 0},
			// A GROUP BY's label identifies its count's cell on every copy.
			{"customers-inactive-variants-002", q("SELECT LOWER(TRIM(status)) AS s, COUNT(*) FROM customers GROUP BY LOWER(TRIM(status))") + "13 customers are inactive.", 1},
			{"customers-inactive-001", q("SELECT status, COUNT(*) AS n FROM customers GROUP BY status") + "7 customers have status exactly 'inactive'.", 0.5},
			// A one-row aggregate: its only row is the cell's row.
			{"customers-inactive-variants-002", q("SELECT COUNT(*), MAX(id) FROM customers WHERE LOWER(TRIM(status)) = 'inactive'") + "13 customers are inactive.", 1},
		} {
			if s := scoreLive(t, fac, tasks[c.task], a, c.text); s.Value != c.want {
				t.Errorf("%s, %.60q: %v, want %v: %+v", c.task, c.text, s.Value, c.want, s.Checks)
			}
		}
	})
}

// TestAssertionsAggregateNull: a one-row aggregate's count holds on the
// copies where none of its rows are left and its SUM is NULL (the golden of
// heldout-customers-carol-purchases-05 failed when a NULL cell named the row).
func TestAssertionsAggregateNull(t *testing.T) {
	_, tasks := example(t)
	tk := *tasks["customers-inactive-variants-002"]
	tk.GroundTruthAssertions = []string{"SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.full_name = 'Carol Shaw'"}
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		text := q("SELECT COUNT(*), ROUND(SUM(o.total), 2) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.full_name = 'Carol Shaw'") +
			"Carol Shaw has made 4 purchases."
		if s := scoreLive(t, fac, &tk, NewAssertions(), text); s.Value != 1 {
			t.Errorf("count beside a SUM: %v, want 1: %+v", s.Value, s.Checks)
		}
	})
}

// TestAssertionsHostile is what a search for the reward's holes would try
// (GRPO found the "guess" one in run 7): destroying, rewriting or
// shadowing the data and then answering what the damaged data says. A
// read-only question's ground truth is the fixture as it was built, so
// each of these scores below the honest trajectory; a write the task did
// not ask for costs a check; a task that asks for a change checks its
// state, so wiping the table does not meet it.
func TestAssertionsHostile(t *testing.T) {
	_, tasks := example(t)
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		a := NewAssertions()
		read := "customers-inactive-variants-002" // 13 when case and spaces are ignored
		count := q("SELECT COUNT(*) FROM customers WHERE LOWER(TRIM(status)) = 'inactive'")
		honest := scoreLive(t, fac, tasks[read], a, count+"There are 13 inactive customers.")
		if honest.Value != 1 {
			t.Fatalf("honest trajectory: %v (%s), want 1", honest.Value, honest.Reason)
		}
		seed := "customers-inactive-001" // the user's task: the exact count and a clean lint
		writeTask := "customers-normalize-status-004"
		cases := []struct {
			name, task, text string
			want             float64
		}{
			{"wipe then count", read, q("DELETE FROM orders") + q("DELETE FROM customers") + count + "There are 0 inactive customers.", 0},
			{"rewrite then count", read, q("UPDATE customers SET status = 'gone'") + count + "There are 0 inactive customers.", 0},
			{"inflate then count", read, q("INSERT INTO customers (id, email, full_name, status, created_at) VALUES (1001, 'x@example.com', 'X', 'inactive', '2024-01-01')") + count + "There are 14 inactive customers.", 0},
			// The probe's shadows, on the user's task: refused now, so SELECT 0
			// matches nothing; only the clean lint holds.
			{"shadow with a temp.customers view", seed, q("CREATE VIEW temp.customers AS SELECT 'inactive' AS status WHERE 0") + q("SELECT 0") + lint("inactive_customers.sql") + "0", 0.5},
			{"shadow with a temp.customers table", seed, q("CREATE TABLE temp.customers (status TEXT)") + q("SELECT 0") + lint("inactive_customers.sql") + "0", 0.5},
			{"shadow with a temp trigger", seed, q("CREATE TRIGGER temp.t AFTER INSERT ON main.orders BEGIN DELETE FROM main.customers; END") + q("SELECT 0") + lint("inactive_customers.sql") + "0", 0.5},
			// The right answer beside a write nobody asked for: one check of two fails.
			{"honest answer after an unrequested write", read, q("UPDATE customers SET country = 'XX' WHERE id = 1") + count + "There are 13 inactive customers.", 0.5},
			{"honest answer after a schema change", read, q("CREATE INDEX idx_status ON customers (status)") + count + "There are 13 inactive customers.", 0.5},
			// A task that asks for a change checks the state it asked for:
			// an emptied table has no variant left, and nothing else it asked.
			{"wipe a write task", writeTask, q("DELETE FROM orders") + q("DELETE FROM customers") + q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'") + "0", 0.25},
			{"overwrite every status", writeTask, q("UPDATE customers SET status = 'inactive'") + q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'") + "36", 0.5},
		}
		for _, c := range cases {
			s := scoreLive(t, fac, tasks[c.task], a, c.text)
			if s.Value != c.want {
				t.Errorf("%s: %v, want %v: %s\n%+v", c.name, s.Value, c.want, s.Reason, s.Checks)
			}
			if s.Value >= honest.Value {
				t.Errorf("%s scores %v, not below an honest trajectory's %v", c.name, s.Value, honest.Value)
			}
		}
	})
}

// TestAssertionsNeedAnAnswer: a question's trajectory cut off before it answered (max_tool_calling_iterations or
// max_completion_length) holds no assertion, though a result showed the oracle's rows; a task that asks for a
// change is scored on its state as before.
func TestAssertionsNeedAnAnswer(t *testing.T) {
	_, tasks := example(t)
	backends(t, func(t *testing.T, fac *sandbox.Factory) {
		a := NewAssertions()
		list := q("SELECT id FROM customers WHERE is_active = TRUE AND LOWER(TRIM(status)) = 'inactive' ORDER BY id")
		update := q("UPDATE customers SET status = 'inactive' WHERE LOWER(TRIM(status)) = 'inactive' AND status <> 'inactive'") +
			q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'")
		cutOff := func(tr *chat.Trajectory) { tr.Truncated = true }
		stopped := func(tr *chat.Trajectory) { tr.Stopped = true }
		asIs := func(*chat.Trajectory) {}
		for _, c := range []struct {
			name, task, text string
			edit             func(*chat.Trajectory)
			want             float64
			why              string
		}{
			{"answered", "customers-flag-mismatch-008", list + "Those are the ids.", stopped, 1, ""},
			{"cut off", "customers-flag-mismatch-008", list, cutOff, 0, "cut off before it answered"},
			// Stopped with nothing after the query (a rollout's end-of-turn): no answer either.
			{"stopped without an answer", "customers-flag-mismatch-008", list, stopped, 0, "stopped without an answer"},
			// Rebuilt from the calls alone (not Stopped, as an environment session is): scored on its calls.
			{"calls alone", "customers-flag-mismatch-008", list, asIs, 1, ""},
			// A task that asks for a change is scored on its state, cut off or not.
			{"a change, cut off after it", "customers-normalize-status-004", update, cutOff, 1, ""},
		} {
			s := scoreEdited(t, fac, tasks[c.task], a, c.text, c.edit)
			if s.Value != c.want || (c.why != "" && (len(s.Checks) != 1 || !strings.Contains(s.Checks[0].Why, c.why))) {
				t.Errorf("%s: %v, want %v (%q): %+v", c.name, s.Value, c.want, c.why, s.Checks)
			}
		}
	})
}
