package task_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/task"
)

var update = flag.Bool("update", false, "rewrite the query_database observations of examples/customers/tasks.jsonl from the real database")

const (
	exampleFixtures = "../examples/fixtures"
	exampleTasks    = "../examples/customers/tasks.jsonl"
)

// TestExampleTasks loads the example tasks strictly and replays every
// golden trajectory's query_database calls on a fresh SQLite fork of the
// fixture: each recorded observation must be what the database returns,
// and every SQL assertion must hold for the golden (an observation with the
// oracle's rows, or a one-cell oracle's value in the final answer).
func TestExampleTasks(t *testing.T) {
	fixtures, err := task.LoadFixtures(exampleFixtures)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := task.Load(exampleTasks, task.LoadOptions{Fixtures: fixtures})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 5 {
		t.Fatalf("%d tasks", len(tasks))
	}
	seed := tasks[0]
	if seed.Task != "Find all inactive customer records in postgres and verify schema integrity." ||
		!reflect.DeepEqual(seed.GroundTruthAssertions, []string{"SELECT COUNT(*) FROM customers WHERE status = 'inactive'", "exit_code == 0"}) ||
		!strings.HasPrefix(seed.SystemPrompt, "You are a Model Context Protocol reasoning agent.") {
		t.Errorf("first task is not the user's task verbatim: %+v", seed)
	}
	ctx := context.Background()
	templates := map[string]*sqldb.Template{}
	defer func() {
		for _, tpl := range templates {
			tpl.Close()
		}
	}()
	changed := false
	for ti := range tasks {
		tk := &tasks[ti]
		fx := fixtures[tk.Fixture]
		tpl := templates[tk.Fixture]
		if tpl == nil {
			if tpl, err = sqldb.NewTemplate(ctx, fx.SchemaSQL, fx.DataSQL, sqldb.Options{}); err != nil {
				t.Fatal(err)
			}
			templates[tk.Fixture] = tpl
		}
		db, err := tpl.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var observations []*sqldb.Result
		if len(tk.Golden) == 0 || tk.Golden[len(tk.Golden)-1].Role != "assistant" || tk.Golden[len(tk.Golden)-1].Content == "" {
			t.Errorf("%s: golden must end with an assistant answer", tk.ID)
		}
		for mi, m := range tk.Golden {
			if len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != "query_database" {
				continue
			}
			var args struct{ SQL string }
			if err := json.Unmarshal(m.ToolCalls[0].Arguments, &args); err != nil {
				t.Fatalf("%s: %v", tk.ID, err)
			}
			res, err := db.Query(ctx, args.SQL)
			want := ""
			var qe *sqldb.QueryError
			switch {
			case err == nil:
				want = res.Text()
				observations = append(observations, res)
			case errors.As(err, &qe):
				want = qe.Error()
			default:
				t.Fatalf("%s: %s: %v", tk.ID, args.SQL, err)
			}
			if mi+1 >= len(tk.Golden) || tk.Golden[mi+1].Role != "tool" {
				t.Errorf("%s: golden[%d]'s call has no tool message after it", tk.ID, mi)
				continue
			}
			if obs := &tk.Golden[mi+1]; obs.Content != want {
				if *update {
					obs.Content = want
					changed = true
				} else {
					t.Errorf("%s: golden[%d] observation differs from the database's:\n got: %q\nwant: %q", tk.ID, mi+1, obs.Content, want)
				}
			}
		}
		answer := tk.Golden[len(tk.Golden)-1].Content
		for _, a := range tk.GroundTruthAssertions {
			if !strings.HasPrefix(strings.ToUpper(a), "SELECT") {
				continue
			}
			oracle, err := db.Oracle(ctx, a)
			if err != nil {
				t.Errorf("%s: oracle %s: %v", tk.ID, a, err)
				continue
			}
			if !surfaced(oracle, observations, answer, strings.Contains(strings.ToUpper(a), "ORDER BY")) {
				t.Errorf("%s: the golden does not surface the oracle's result %v (%s)", tk.ID, oracle.Rows, a)
			}
		}
		db.Close()
	}
	if changed {
		var b bytes.Buffer
		for _, tk := range tasks {
			line, err := json.Marshal(tk)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(exampleTasks, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", filepath.Base(exampleTasks))
	}
}

// surfaced: an observation with the oracle's rows, or a one-cell value in the answer.
func surfaced(oracle *sqldb.Result, obs []*sqldb.Result, answer string, ordered bool) bool {
	key := func(rows [][]any) string {
		lines := make([]string, len(rows))
		for i, r := range rows {
			lines[i] = fmt.Sprint(r...)
		}
		if !ordered {
			sort.Strings(lines)
		}
		return strings.Join(lines, "\n")
	}
	want := key(oracle.Rows)
	for _, o := range obs {
		if key(o.Rows) == want {
			return true
		}
	}
	return len(oracle.Rows) == 1 && len(oracle.Rows[0]) == 1 && strings.Contains(answer, fmt.Sprint(oracle.Rows[0][0]))
}
