package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/tokenizer"
)

const (
	heldoutTasks  = "../../examples/experiment/heldout_tasks.jsonl"
	exampleTasks  = "../../examples/customers/tasks.jsonl"
	fixturesRoot  = "../../examples/fixtures"
	smallTokDir   = "../../tokenizer/small/qwen2.5-2048"
	evalRateNames = "success_rate pass_at_k tool_accuracy hallucination_rate format_error_rate mean_turns self_correction_rate"
)

func runEvalCmd(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"eval"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("eval %v: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// checkEvalJSON checks the documented keys of eval --json and returns the object.
func checkEvalJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("eval --json output %q: %v", out, err)
	}
	if strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("eval --json printed more than one line: %q", out)
	}
	for _, k := range append(strings.Fields(evalRateNames), "n_tasks", "k", "categories") {
		if _, ok := rep[k]; !ok {
			t.Errorf("eval --json has no %q: %s", k, out)
		}
	}
	cats, _ := rep["categories"].(map[string]any)
	if len(cats) == 0 {
		t.Fatalf("no categories: %s", out)
	}
	for name, c := range cats {
		m, _ := c.(map[string]any)
		for _, k := range append(strings.Fields(evalRateNames), "n_tasks") {
			if _, ok := m[k]; !ok {
				t.Errorf("category %s has no %q", name, k)
			}
		}
	}
	return rep
}

// TestEvalGolden: --golden succeeds on every held-out and example task;
// the JSON has the documented keys; the trajectories and report are saved.
func TestEvalGolden(t *testing.T) {
	for _, tasks := range []string{heldoutTasks, exampleTasks} {
		dir := t.TempDir()
		out, _ := runEvalCmd(t, "--golden", "--tasks", tasks, "--fixtures", fixturesRoot, "--json", "--output-dir", dir)
		rep := checkEvalJSON(t, out)
		if rep["success_rate"] != 1.0 || rep["pass_at_k"] != 1.0 || rep["k"] != 1.0 {
			t.Errorf("%s: golden %s", tasks, out)
		}
		n := int(rep["n_tasks"].(float64))
		f, err := os.Open(filepath.Join(dir, "trajectories.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<22)
		lines := 0
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"task_id", "sample", "success", "turns", "answer", "reward"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("trajectory line %d has no %q", lines+1, k)
				}
			}
			lines++
		}
		f.Close()
		if lines != n {
			t.Errorf("%s: %d trajectories saved for %d tasks", tasks, lines, n)
		}
		saved, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		json.Unmarshal(saved, &a)
		json.Unmarshal([]byte(out), &b)
		if ab, _ := json.Marshal(a); string(ab) != strings.TrimSpace(string(mustMarshal(b))) {
			t.Errorf("report.json differs from the printed JSON")
		}
		page, err := os.ReadFile(filepath.Join(dir, "report.html"))
		if err != nil {
			t.Fatal(err)
		}
		var first struct {
			TaskID string `json:"task_id"`
		}
		if err := json.Unmarshal(firstLine(t, filepath.Join(dir, "trajectories.jsonl")), &first); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(page, []byte("<!DOCTYPE html>")) || !bytes.Contains(page, []byte(`"task_id":"`+first.TaskID+`"`)) {
			t.Errorf("%s: report.html is no page of the evaluation (first task %q)", tasks, first.TaskID)
		}
	}
}

func mustMarshal(v any) []byte { b, _ := json.Marshal(v); return b }

func firstLine(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return line
}

// TestEvalModelDeterministic: a real (tiny, random) model evaluated twice
// with one seed prints the same report; the table names every category.
func TestEvalModelDeterministic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	eos, _ := tok.TokenID("<|im_end|>")
	cfg := model.TinyConfig(tokenizer.SmallVocabSize, -1, eos)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 64, 128, 1
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 4, 2
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(backend, cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir, model.SaveOptions{TokenizerDir: smallTokDir}); err != nil {
		t.Fatal(err)
	}
	args := []string{"--model", dir, "--tasks", heldoutTasks, "--fixtures", fixturesRoot, "--k", "2", "--seed", "11",
		"--max-prompt-length", "128", "--max-completion-length", "24", "--max-tool-calling-iterations", "1"}
	out1, _ := runEvalCmd(t, append(args, "--json")...)
	out2, _ := runEvalCmd(t, append(args, "--json")...)
	if out1 != out2 {
		t.Errorf("same seed, different reports:\n%s\n%s", out1, out2)
	}
	rep := checkEvalJSON(t, out1)
	if rep["k"] != 2.0 || rep["n_tasks"] != 25.0 || rep["n_trajectories"] != 50.0 {
		t.Errorf("report: %s", out1)
	}
	table, _ := runEvalCmd(t, args...)
	for _, want := range []string{"pass@2", "overall", "case-variants", "discover-table", "empty-result", "sql-error", "renamed-column", "lint"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// TestEvalConfig: --config supplies tasks, fixtures and generation
// settings; bad k/samples combinations are refused.
func TestEvalConfig(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	cfgPath := filepath.Join(t.TempDir(), "eval.yaml")
	yaml := "tasks: " + abs(exampleTasks) + "\nfixtures: " + abs(fixturesRoot) + "\noutput_dir: " + abs(t.TempDir()) +
		"\nmax_completion_length: 4096\nmax_tool_calling_iterations: 1\nrewards:\n  - name: compute_mcp_reward\n    weight: 1.0\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := runEvalCmd(t, "--config", cfgPath, "--golden", "--json")
	if rep := checkEvalJSON(t, out); rep["success_rate"] != 1.0 || rep["n_tasks"] != 8.0 {
		t.Errorf("config run: %s", out)
	}
	root := newRootCmd()
	root.SetArgs([]string{"eval", "--golden", "--tasks", exampleTasks, "--fixtures", fixturesRoot, "--k", "3", "--samples", "2"})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "k <= samples") {
		t.Errorf("k 3 with 2 samples: %v", err)
	}
}
