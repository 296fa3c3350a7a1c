package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// TestEvalServerFailuresShown: issue 29's eval against a server that
// answers its probe and then 500 to every request (or to one task's): the
// failures are counted in the table and on stderr, left out of the rates,
// and when every trajectory failed the command fails.
func TestEvalServerFailuresShown(t *testing.T) {
	var failAll atomic.Bool
	var failures atomic.Int32 // requests still to fail, when not all
	failAll.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		json.Unmarshal(b, &req)
		if req.MaxTokens == 1 || (!failAll.Load() && failures.Add(-1) < 0) {
			fmt.Fprint(w, `{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "I cannot tell."}}]}`)
			return
		}
		http.Error(w, `{"error": {"message": "boom"}}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	args := []string{"eval", "--policy", srv.URL + "/v1", "--served-model", "m", "--max-retries", "-1",
		"--tasks", exampleTasks, "--fixtures", fixturesRoot, "--temperature", "0", "--max-completion-length", "64"}

	stdout, stderr, err := runCmd(args...)
	if err == nil || !strings.Contains(err.Error(), "every trajectory failed") {
		t.Fatalf("every request failed: err %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "8 of 8 trajectories failed") || !strings.Contains(stderr, "HTTP 500: boom") {
		t.Errorf("stderr does not say the trajectories failed:\n%s", stderr)
	}
	lines := strings.Split(stdout, "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "errors") || !strings.Contains(lines[1], "  8  ") {
		t.Errorf("table without the errors:\n%s", stdout)
	}

	// One trajectory's request fails: the others are scored, the rates
	// are over them, and the command succeeds.
	failAll.Store(false)
	failures.Store(1)
	stdout, stderr, err = runCmd(append(args, "--json")...)
	if err != nil {
		t.Fatalf("one failed: %v\n%s", err, stderr)
	}
	var rep struct {
		NTrajectories int `json:"n_trajectories"`
		NScored       int `json:"n_scored"`
		NErrors       int `json:"n_errors"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if rep.NTrajectories != 8 || rep.NScored != 7 || rep.NErrors != 1 {
		t.Errorf("report %s", stdout)
	}
	if !strings.Contains(stderr, "1 of 8 trajectories failed") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// TestBrokenAssertionFailsAtLoading: eval (through inputs) and score refuse
// a tasks file with a broken assertion at loading, naming file, line and
// field, instead of failing at scoring.
func TestBrokenAssertionFailsAtLoading(t *testing.T) {
	path := t.TempDir() + "/tasks.jsonl"
	body := `{"id": "ok", "task": "How many customers?", "fixture": "customers", "ground_truth_assertions": ["SELECT COUNT(*) FROM customers"]}
{"id": "bad", "task": "How many customers?", "fixture": "customers", "ground_truth_assertions": ["SELEC COUNT(*) FROM customers"]}
`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	want := path + ":2: field ground_truth_assertions[0]"
	if _, _, err := runCmd("eval", "--golden", "--tasks", path, "--fixtures", fixturesRoot); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("eval: %v, want %q", err, want)
	}
	completions := t.TempDir() + "/c.jsonl"
	os.WriteFile(completions, []byte(`{"task_id": "ok", "completion": "x"}`+"\n"), 0o644)
	if _, _, err := runCmd("score", "--reward", "assertions", "--tasks", path, "--fixtures", fixturesRoot, "--completions", completions); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("score: %v, want %q", err, want)
	}
}
