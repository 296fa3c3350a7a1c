package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExperimentQuick runs the README's experiment, scripts/experiment.sh, in its short form (QUICK=1: one
// seed, a few optimizer steps, two tasks of each evaluated set): task generation on the training fixtures
// and the unseen library fixture, model init, SFT (which skips the edge cases and says so), GRPO, the
// compute control, the three evaluations (and one of GRPO's checkpoint, GRPO_EVAL_STEPS) and the results
// table. The numbers mean nothing at this size; the test checks that every stage ran and wrote what the next
// one and the table read.
func TestExperimentQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the experiment pipeline (about a minute)")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "scripts/experiment.sh")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "QUICK=1", "OUT="+out, "GRPO_EVAL_STEPS=1")
	// The script starts processes of its own: on timeout the whole group goes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	b, err := cmd.CombinedOutput()
	log := string(b)
	if err != nil {
		t.Fatalf("scripts/experiment.sh: %v\n%s", err, log)
	}
	m := regexp.MustCompile(`sft: skipped (\d+) of (\d+) tasks without a golden trajectory`).FindStringSubmatch(log)
	if m == nil || m[1] == "0" || m[1] == m[2] {
		t.Errorf("sft did not report skipping the edge cases (%v):\n%s", m, log)
	}
	for _, model := range []string{"sft", "grpo", "grpo-1", "sft-control"} {
		path := filepath.Join(out, "seed-1", "eval-"+model+".json")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			SuccessRate        *float64                   `json:"success_rate"`
			SelfCorrectionRate json.RawMessage            `json:"self_correction_rate"`
			NTrajectories      int                        `json:"n_trajectories"`
			Categories         map[string]json.RawMessage `json:"categories"`
		}
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if rep.SuccessRate == nil || rep.SelfCorrectionRate == nil || rep.NTrajectories != 8 {
			t.Errorf("%s: %s", path, raw)
		}
		sets := map[string]bool{}
		for c := range rep.Categories {
			sets[strings.SplitN(c, "/", 2)[0]] = true
		}
		if !sets["handwritten"] || !sets["library"] || !sets["unseen"] || !sets["trained"] || len(sets) != 4 {
			t.Errorf("%s: categories of sets %v", path, sets)
		}
	}
	for _, dir := range []string{"sft", "grpo", "sft-control"} {
		if _, err := os.Stat(filepath.Join(out, "seed-1", dir, "final", "model.safetensors")); err != nil {
			t.Error(err)
		}
	}
	// REUSE: another GRPO (on the edge cases alone, with recovery branching) from the same SFT models and
	// control, every model evaluated again (the reward may have changed since): with the same reward, the
	// same numbers. Its stages run one at a time (SIDE_BY_SIDE=0, as for SmolLM2).
	out2 := t.TempDir()
	cmd2 := exec.CommandContext(ctx, "bash", "scripts/experiment.sh")
	cmd2.Dir = cmd.Dir
	cmd2.Env = append(os.Environ(), "QUICK=1", "OUT="+out2, "REUSE="+out, "GRPO_TASKS=edge", "GRPO_CONFIG=examples/experiment/grpo-recovery.yaml", "SIDE_BY_SIDE=0")
	cmd2.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd2.Cancel = func() error { return syscall.Kill(-cmd2.Process.Pid, syscall.SIGKILL) }
	if b, err := cmd2.CombinedOutput(); err != nil {
		t.Fatalf("REUSE: scripts/experiment.sh: %v\n%s", err, b)
	}
	for _, f := range []string{"eval-sft.json", "eval-sft-control.json"} {
		a, errA := os.ReadFile(filepath.Join(out, "seed-1", f))
		b, errB := os.ReadFile(filepath.Join(out2, "seed-1", f))
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("REUSE: %s differs from the first run's (same models, same reward, same eval seed) (%v, %v)", f, errA, errB)
		}
	}
	if _, err := os.Stat(filepath.Join(out2, "seed-1", "eval-grpo.json")); err != nil {
		t.Errorf("REUSE: GRPO not evaluated: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(out2, "seed-1", "grpo", "metrics.jsonl")); err != nil || !strings.Contains(string(b), `"recovery/branches"`) {
		t.Errorf("REUSE with grpo-recovery.yaml: no recovery/branches in GRPO's metrics (%v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(out2, "grpo_tasks.jsonl")); err != nil || len(b) == 0 || strings.Contains(string(b), `"golden"`) {
		t.Errorf("REUSE with GRPO_TASKS=edge: GRPO's tasks must be the edge cases alone (%v)", err)
	}
	// REUSE of a run whose control never finished, whose tasks differ from these only in what the reward reads
	// (witness_sql): the SFT model is reused, the control trained here. Tasks that differ in a golden refuse.
	src := t.TempDir()
	if err := os.CopyFS(src, os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(src, "seed-1", "sft-control")); err != nil {
		t.Fatal(err)
	}
	rewrite := func(edit func(task map[string]any)) {
		t.Helper()
		path := filepath.Join(src, "train_tasks.jsonl")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var tk map[string]any
			if err := json.Unmarshal([]byte(l), &tk); err != nil {
				t.Fatal(err)
			}
			edit(tk)
			b, err := json.Marshal(tk)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(b))
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(func(tk map[string]any) { delete(tk, "witness_sql") })
	reuse := func(env ...string) (string, string, error) {
		dir := t.TempDir()
		c := exec.CommandContext(ctx, "bash", "scripts/experiment.sh")
		c.Dir = cmd.Dir
		c.Env = append(append(os.Environ(), "QUICK=1", "OUT="+dir, "REUSE="+src, "SIDE_BY_SIDE=0"), env...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
		b, err := c.CombinedOutput()
		return dir, string(b), err
	}
	out3, log3, err := reuse()
	if err != nil {
		t.Fatalf("REUSE without a control: scripts/experiment.sh: %v\n%s", err, log3)
	}
	if _, err := os.Stat(filepath.Join(out3, "seed-1", "sft-control", "final", "model.safetensors")); err != nil {
		t.Errorf("REUSE of a run without a control: the control was not trained here: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(out3, "times.tsv")); err != nil || !regexp.MustCompile(`(?m)^seed-1 sft-control\t`).Match(b) || !strings.Contains(string(b), "seed-1 (reused) sft\t") {
		t.Errorf("REUSE without a control: times.tsv should time the control here and list the SFT as reused (%v):\n%s", err, b)
	}
	rewrite(func(tk map[string]any) {
		if g, ok := tk["golden"].([]any); ok && len(g) > 0 {
			tk["golden"] = g[:len(g)-1]
		}
	})
	if _, log4, err := reuse(); err == nil || !strings.Contains(log4, "trained on other tasks") {
		t.Errorf("REUSE of SFT models trained on other goldens: %v, want a refusal:\n%s", err, log4)
	}
	table, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| hand-written edge cases | SFT |", "| hand-written edge cases | SFT + GRPO |",
		"| generated, library fixture (never trained on): edge cases | SFT, control", "wall time:",
		"| every held-out edge case (the goal's measure", "GRPO minus SFT, success rate on every held-out edge case:",
		"| not held out: training edge cases", "GRPO minus SFT, success rate on unseen questions' edge cases on the training fixtures:",
		"| all | SFT + GRPO |", "| 1 | 1-10 |", "| hand-written edge cases | SFT + GRPO, step 1 |",
		"GRPO minus SFT, success rate on every held-out edge case, GRPO at step 1:", "Load average (1 min) over the run"} {
		if !strings.Contains(string(table), row) {
			t.Errorf("results.md lacks %q:\n%s", row, table)
		}
	}
}
