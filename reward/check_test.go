package reward_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/task"
)

// TestCheckAssertion: what compiles and lexes passes, a broken expression
// (a misspelled SQL keyword reads as one) or an unterminated SQL string
// does not.
func TestCheckAssertion(t *testing.T) {
	for src, ok := range map[string]bool{
		"SELECT COUNT(*) FROM customers WHERE status = 'inactive'": true,
		"WITH x AS (SELECT 1) SELECT * FROM x":                     true,
		`exit_code == 0`:                                           true,
		`exit_code_of("report.json") != 0`:                         true,
		`called("query_database") && !called("run_linter")`:        true,
		"SELECT COUNT(*) FROM customers WHERE status = 'inactive":  false,
		"SELEC COUNT(*) FROM customers":                            false,
		`exit_code ==`:                                             false,
		`exitcode == 0`:                                            false,
		`called("query_database") &&`:                              false,
	} {
		if err := reward.CheckAssertion(src); (err == nil) != ok {
			t.Errorf("CheckAssertion(%q) = %v, want ok=%v", src, err, ok)
		}
	}
}

// TestBrokenAssertionFailsAtLoading: with reward.CheckTask, a broken
// assertion is a bad line of its tasks file, named by file, line and field.
func TestBrokenAssertionFailsAtLoading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	os.WriteFile(path, []byte(`{"id": "a", "task": "q", "ground_truth_assertions": ["SELECT 1"]}
{"id": "b", "task": "q", "ground_truth_assertions": ["SELECT 1", "exit_code =="]}
{"id": "c", "task": "q", "state_assertions": ["status == 'gone'"]}
`), 0o644)
	_, err := task.Load(path, task.LoadOptions{Check: reward.CheckTask})
	var le *task.LineError
	if !errors.As(err, &le) || le.Line != 2 || le.Field != "ground_truth_assertions[1]" || !strings.Contains(err.Error(), path+":2:") {
		t.Fatalf("err = %v, want line 2, ground_truth_assertions[1]", err)
	}
	tasks, err := task.Load(path, task.LoadOptions{Check: reward.CheckTask, SkipBad: true})
	var skip *task.SkipError
	if !errors.As(err, &skip) || len(tasks) != 1 || len(skip.Skipped) != 2 || skip.Skipped[1].Line != 3 || skip.Skipped[1].Field != "state_assertions[0]" {
		t.Fatalf("SkipBad: %d tasks, %v", len(tasks), err)
	}
}

// TestExampleTasksCheck: every example tasks file passes the check.
func TestExampleTasksCheck(t *testing.T) {
	files, _ := filepath.Glob("../examples/*/*tasks*.jsonl")
	if len(files) == 0 {
		t.Fatal("no example tasks files")
	}
	for _, f := range files {
		if _, err := task.Load(f, task.LoadOptions{Check: reward.CheckTask}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
