package runlog

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcprl/mcprl/progress"
	"github.com/mcprl/mcprl/report"
)

func completion(step, group, index int, r float64) report.Completion {
	adv := r - 0.5
	return report.Completion{Step: step, Group: group, Index: index, TaskID: "t", Prompt: "p",
		Rewards: map[string]*float64{"seed": &r}, Reward: &r, Advantage: &adv}
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// A run of two logging steps writes completions.jsonl, TensorBoard events, plain progress lines and a
// report; a resumed run drops the completions of the steps it redoes.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	l, err := Open(Options{OutputDir: dir, Label: "train", TotalSteps: 2, Progress: &out, ReportTo: []string{"tensorboard"}})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := os.Create(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 2; step++ {
		l.Step(step, progress.F("reward", 0.5))
		logs := map[string]float64{"step": float64(step), "loss": 0.25, "reward": 0.5, "kl": math.NaN()}
		b, _ := json.Marshal(map[string]any{"step": step, "loss": 0.25, "reward": 0.5, "kl": nil})
		metrics.Write(append(b, '\n'))
		if err := l.Logged(step, logs, []report.Completion{completion(step, 0, 0, 0), completion(step, 0, 1, 1)}, "reward", "loss"); err != nil {
			t.Fatal(err)
		}
	}
	metrics.Close()
	l.Saved()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	if got := lines(t, filepath.Join(dir, "completions.jsonl")); len(got) != 4 {
		t.Fatalf("completions.jsonl has %d lines, want 4", len(got))
	}
	events, _ := filepath.Glob(filepath.Join(dir, "runs", "*", "events.out.tfevents.*"))
	if len(events) != 1 {
		t.Errorf("event files %v, want one under runs/", events)
	}
	progressLines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(progressLines) != 2 || !strings.HasPrefix(progressLines[1], "train step 2/2  reward 0.500  loss 0.2500") {
		t.Errorf("progress:\n%s", out.String())
	}
	run, err := report.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Samples) != 2 || len(run.Samples[1].Groups[0].Trajectories) != 2 {
		t.Errorf("the report reads back %+v", run.Samples)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Error(err)
	}

	// Resumed at step 1: step 2's completions go, step 1's stay.
	l, err = Open(Options{OutputDir: dir, Label: "train", TotalSteps: 2, StartStep: 1})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, line := range lines(t, filepath.Join(dir, "completions.jsonl")) {
		if !strings.HasPrefix(line, `{"step":1,`) {
			t.Errorf("resumed at step 1, completions.jsonl keeps %s", line)
		}
	}
}

func TestReportTo(t *testing.T) {
	for _, ok := range [][]string{nil, {"none"}, {"tensorboard"}, {"all"}} {
		if err := CheckReportTo(ok); err != nil {
			t.Errorf("report_to %v: %v", ok, err)
		}
	}
	if err := CheckReportTo([]string{"wandb"}); err == nil || !strings.Contains(err.Error(), `"wandb"`) {
		t.Errorf("report_to wandb: %v, want an error naming it", err)
	}
	dir := t.TempDir()
	if l, err := Open(Options{OutputDir: dir, ReportTo: []string{"none"}}); err != nil {
		t.Fatal(err)
	} else {
		l.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); !os.IsNotExist(err) {
		t.Errorf("report_to none made runs/: %v", err)
	}
}

func TestDefaultLoggingDir(t *testing.T) {
	host, _ := os.Hostname()
	got := DefaultLoggingDir("out", time.Date(2026, 12, 3, 14, 5, 9, 0, time.UTC))
	if want := filepath.Join("out", "runs", "Dec03_14-05-09_"+host); got != want {
		t.Errorf("DefaultLoggingDir = %q, want %q", got, want)
	}
}
