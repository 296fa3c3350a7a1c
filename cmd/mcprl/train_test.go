package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"
)

// trainConfig writes a small GRPO config on the example task, starting from
// the shipped base policy.
func trainConfig(t *testing.T, steps int) string {
	t.Helper()
	cfg := fmt.Sprintf(`model: ../../examples/customers/base
tasks: ../../examples/customers/quick_tasks.jsonl
fixtures: ../../examples/fixtures
rewards:
  - name: seed
learning_rate: 5.0e-4
max_steps: %d
per_device_train_batch_size: 4
gradient_accumulation_steps: 1
lr_scheduler_type: constant
logging_steps: 1
save_steps: 1
seed: 7
num_generations: 4
max_prompt_length: 512
max_completion_length: 48
max_tool_calling_iterations: 1
temperature: 1.0
`, steps)
	path := filepath.Join(t.TempDir(), "train.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// metricsByStep reads metrics.jsonl keyed by step.
func metricsByStep(t *testing.T, path string) map[int]map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int]map[string]any{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[int(rec["step"].(float64))] = rec
	}
	return out
}

// A run killed with SIGKILL after a checkpoint and resumed with --resume
// logs the same metrics for the steps after the checkpoint as a run that
// was never stopped.
func TestTrainResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three short runs")
	}
	bin := buildMcprl(t)
	const steps = 4
	cfg := trainConfig(t, steps)

	whole := filepath.Join(t.TempDir(), "whole")
	if out, err := exec.Command(bin, "train", "--config", cfg, "--output-dir", whole).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}

	killed := filepath.Join(t.TempDir(), "killed")
	cmd := exec.Command(bin, "train", "--config", cfg, "--output-dir", killed)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(killed, "checkpoint-2", "trainer_state.json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no checkpoint-2 within 5 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(killed, "final")); err == nil {
		t.Fatal("the run finished before it was killed; the test proves nothing")
	}
	if out, err := exec.Command(bin, "train", "--config", cfg, "--output-dir", killed, "--resume").CombinedOutput(); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}

	want := metricsByStep(t, filepath.Join(whole, "metrics.jsonl"))
	got := metricsByStep(t, filepath.Join(killed, "metrics.jsonl"))
	if len(got) != steps || len(want) != steps {
		t.Fatalf("metrics for %d and %d steps, want %d each", len(got), len(want), steps)
	}
	moved := false
	for step := 3; step <= steps; step++ {
		keys := make([]string, 0, len(want[step]))
		for k := range want[step] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w, g := want[step][k], got[step][k]
			wf, wok := w.(float64)
			gf, gok := g.(float64)
			if wok != gok || (!wok && w != g) {
				t.Errorf("step %d %s: resumed %v, uninterrupted %v", step, k, g, w)
				continue
			}
			if wok && math.Abs(wf-gf) > 1e-5*math.Max(1, math.Abs(wf)) {
				t.Errorf("step %d %s: resumed %v, uninterrupted %v", step, k, gf, wf)
			}
		}
		if gn, _ := want[step]["grad_norm"].(float64); gn > 0 {
			moved = true
		}
	}
	if !moved {
		t.Error("no step after the checkpoint had a gradient: the comparison proves nothing")
	}
}

// The README's main job, whole: `mcprl train --config
// examples/customers/quick.yaml` raises the mean reward of its last logged
// steps over its first by at least 0.15. It takes minutes on two cores, so it
// runs with MCPRL_LONG_TESTS=1; in every run, TestTrainResumeAfterKill trains
// the same example briefly.
func TestQuickExampleRaisesReward(t *testing.T) {
	if os.Getenv("MCPRL_LONG_TESTS") == "" {
		t.Skip("set MCPRL_LONG_TESTS=1 to run the quick example whole (minutes)")
	}
	bin := buildMcprl(t)
	out := filepath.Join(t.TempDir(), "quick")
	cmd := exec.Command(bin, "train", "--config", "examples/customers/quick.yaml", "--output-dir", out)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, b)
	}
	recs := metricsByStep(t, filepath.Join(out, "metrics.jsonl"))
	steps := make([]int, 0, len(recs))
	for s := range recs {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	const window = 5
	if len(steps) < 2*window {
		t.Fatalf("%d logged steps, want at least %d", len(steps), 2*window)
	}
	mean := func(ss []int) float64 {
		sum := 0.0
		for _, s := range ss {
			sum += recs[s]["reward"].(float64)
		}
		return sum / float64(len(ss))
	}
	first, last := mean(steps[:window]), mean(steps[len(steps)-window:])
	t.Logf("mean reward: first %d steps %.3f, last %d steps %.3f", window, first, window, last)
	if last-first < 0.15 {
		t.Errorf("GRPO raised the mean reward by %.3f (from %.3f to %.3f), want at least 0.15", last-first, first, last)
	}
}
