package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/rundir"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/task"
)

// badTasksFile writes the example tasks with two bad lines among them: a
// fixture name with a typo and a line that is not JSON.
func badTasksFile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/customers/quick_tasks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	lines[1] = strings.Replace(lines[1], `"fixture": "customers"`, `"fixture": "customer"`, 1)
	if !strings.Contains(lines[1], `"customer"`) {
		t.Fatalf("line 2 names no customers fixture: %s", lines[1])
	}
	lines = append(lines[:3], append([]string{`{"task": "unterminated`}, lines[3:]...)...)
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCmd(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// Bad task lines fail a run, every one listed; --skip-bad-tasks skips them,
// prints the count and, for train, writes them to the run folder.
func TestBadTaskLines(t *testing.T) {
	tasks := badTasksFile(t)
	_, _, err := runCmd("eval", "--golden", "--tasks", tasks, "--fixtures", fixturesRoot)
	if err == nil {
		t.Fatal("eval on a tasks file with bad lines succeeded")
	}
	for _, want := range []string{tasks + ":2: field fixture", tasks + ":4:", "2 bad line(s)", "--skip-bad-tasks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	_, stderr, err := runCmd("eval", "--golden", "--tasks", tasks, "--fixtures", fixturesRoot, "--skip-bad-tasks")
	if err != nil || !strings.Contains(stderr, "2 bad line(s) skipped") {
		t.Errorf("eval --skip-bad-tasks: %v\n%s", err, stderr)
	}

	out := filepath.Join(t.TempDir(), "run")
	_, _, err = runCmd("train", "--config", trainConfig(t, 1), "--tasks", tasks, "--output-dir", out)
	if err == nil || !strings.Contains(err.Error(), "2 bad line(s)") {
		t.Fatalf("train on bad lines: %v", err)
	}
	_, stderr, err = runCmd("train", "--config", trainConfig(t, 1), "--tasks", tasks, "--output-dir", out, "--skip-bad-tasks")
	if err != nil {
		t.Fatalf("train --skip-bad-tasks: %v\n%s", err, stderr)
	}
	logged, err := os.ReadFile(filepath.Join(out, task.SkippedFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logged), "2 bad task line(s) skipped") || !strings.Contains(string(logged), tasks+":2: field fixture") {
		t.Errorf("%s:\n%s", task.SkippedFile, logged)
	}
}

// Without OpenBLAS a run says plainly that the Go kernel runs the matmuls
// and how much slower that is.
func TestSaysWhenGoKernelsRun(t *testing.T) {
	bin := buildMcprl(t)
	tasks := badTasksFile(t) // the run stops after loading the model
	for _, off := range []bool{true, false} {
		cmd := exec.Command(bin, "train", "--config", trainConfig(t, 1), "--tasks", tasks, "--output-dir", filepath.Join(t.TempDir(), "run"), "--engine", "simplego")
		cmd.Env = append(os.Environ(), "MCPRL_OPENBLAS=")
		if off {
			cmd.Env = append(cmd.Env, "MCPRL_OPENBLAS=off")
		}
		out, _ := cmd.CombinedOutput()
		said := strings.Contains(string(out), "run on the Go kernel, about 8x slower")
		if off && !said {
			t.Errorf("MCPRL_OPENBLAS=off: output does not say the Go kernel runs:\n%s", out)
		}
		if !off && said != (model.OpenBLASMissing() != nil) {
			t.Errorf("OpenBLAS missing=%v, but the output says otherwise:\n%s", model.OpenBLASMissing(), out)
		}
	}
}

// TestRunFolderProtected: a second run on a held output dir fails at once
// naming the holder; a fresh run refuses a folder with an earlier run's
// checkpoints unless --overwrite_output_dir; --resume with nothing to
// resume says so.
func TestRunFolderProtected(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	cfg := trainConfig(t, 1)
	lock, err := rundir.Acquire(out)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = runCmd("train", "--config", cfg, "--output-dir", out)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d", os.Getpid())) {
		t.Errorf("train on a held dir: %v, want the holder named", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing a held dir took %s", d)
	}
	lock.Release()

	_, _, err = runCmd("train", "--config", cfg, "--output-dir", out, "--resume")
	if err == nil || !strings.Contains(err.Error(), "no complete checkpoint to resume from") {
		t.Errorf("--resume on an empty dir: %v", err)
	}

	// An earlier run's outputs.
	if err := os.MkdirAll(filepath.Join(out, "checkpoint-7"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(out, "metrics.jsonl"), []byte(`{"step": 7}`+"\n"), 0o644)
	_, _, err = runCmd("train", "--config", cfg, "--output-dir", out)
	if err == nil || !strings.Contains(err.Error(), "checkpoint-7") || !strings.Contains(err.Error(), "--overwrite_output_dir") {
		t.Errorf("fresh run over checkpoints: %v", err)
	}
	sftCfg := filepath.Join(t.TempDir(), "sft.yaml")
	if err := os.WriteFile(sftCfg, []byte("seed: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd("sft", "--config", sftCfg, "--output-dir", out)
	if err == nil || !strings.Contains(err.Error(), "--overwrite_output_dir") {
		t.Errorf("sft over checkpoints: %v", err)
	}
	_, _, err = runCmd("train", "--config", cfg, "--output-dir", out, "--resume")
	if err == nil || !strings.Contains(err.Error(), "(it holds checkpoint-7, metrics.jsonl)") {
		t.Errorf("--resume with an incomplete checkpoint: %v", err)
	}
	if _, stderr, err := runCmd("train", "--config", cfg, "--output-dir", out, "--overwrite_output_dir"); err != nil {
		t.Fatalf("--overwrite_output_dir: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "checkpoint-7")); !os.IsNotExist(err) {
		t.Errorf("checkpoint-7 left behind by --overwrite_output_dir: %v", err)
	}
	if m := metricsByStep(t, filepath.Join(out, "metrics.jsonl")); len(m) != 1 || m[1] == nil {
		t.Errorf("metrics.jsonl after overwriting: %v", m)
	}
}

// A model folder that training wrote carries its generation settings, and
// eval samples with them unless flags override.
func TestEvalUsesTrainedGenerationSettings(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runCmd("train", "--config", trainConfig(t, 1), "--output-dir", out); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	final := filepath.Join(out, "final")
	var gc map[string]any
	data, err := os.ReadFile(filepath.Join(final, "generation_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &gc); err != nil {
		t.Fatal(err)
	}
	if gc["max_new_tokens"] != 48.0 || gc["temperature"] != 1.0 || gc["do_sample"] != true || gc["eos_token_id"] == nil {
		t.Errorf("generation_config.json: %v", gc)
	}
	// The quick tasks share one system prompt: training records it with the settings.
	if g, err := sampling.Load(final); err != nil || g == nil || g.SystemPrompt != quickSystemPrompt(t) || g.MaxCompletionLength != 48 {
		t.Errorf("trained settings %+v (%v), want the quick tasks' system prompt", g, err)
	}
	trained := "max_prompt_length 512, max_completion_length 48, max_tool_calling_iterations 1"
	_, stderr, err := runCmd("eval", "--model", final, "--tasks", "../../examples/customers/quick_tasks.jsonl", "--fixtures", fixturesRoot, "--json")
	if err != nil || !strings.Contains(stderr, trained) {
		t.Errorf("eval of a trained model folder: %v; want %q in\n%s", err, trained, stderr)
	}
	_, stderr, err = runCmd("eval", "--model", final, "--tasks", "../../examples/customers/quick_tasks.jsonl", "--fixtures", fixturesRoot, "--json", "--max-completion-length", "40")
	if err != nil || !strings.Contains(stderr, "max_completion_length 40, max_tool_calling_iterations 1") {
		t.Errorf("eval with a flag over the trained settings: %v\n%s", err, stderr)
	}
}
