package report

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// metricsOf reads a metrics.jsonl independently of Load: step -> key -> value (nil for null).
func metricsOf(t *testing.T, path string) map[int]map[string]*float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int]map[string]*float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]*float64
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		out[int(*rec["step"])] = rec
	}
	return out
}

func TestLoadMetrics(t *testing.T) {
	r, err := Load("testdata/grpo")
	if err != nil {
		t.Fatal(err)
	}
	want := metricsOf(t, "testdata/grpo/metrics.jsonl")
	if len(r.Steps) != len(want) {
		t.Fatalf("%d steps, metrics.jsonl has %d", len(r.Steps), len(want))
	}
	for i, s := range r.Steps {
		if i > 0 && s <= r.Steps[i-1] {
			t.Fatalf("steps not ascending: %v", r.Steps)
		}
		for k, v := range want[s] {
			if k == "step" {
				continue
			}
			got := r.Series[k][i]
			if (got == nil) != (v == nil) || got != nil && *got != *v {
				t.Errorf("step %d %s: %v, metrics.jsonl has %v", s, k, deref(got), deref(v))
			}
		}
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings on a clean run: %v", r.Warnings)
	}
	if len(r.Evals) != 1 || r.Evals[0].Name != "eval-heldout" {
		t.Fatalf("evals %+v, want eval-heldout", r.Evals)
	}
	ev := r.Evals[0]
	var summary struct {
		NTasks        int `json:"n_tasks"`
		NTrajectories int `json:"n_trajectories"`
	}
	if err := json.Unmarshal(ev.Summary, &summary); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range ev.Tasks {
		n += len(g.Trajectories)
		for _, tr := range g.Trajectories {
			if tr.Success == nil || tr.Rewards["verifiable"] == nil || len(tr.Parts["verifiable"]) == 0 {
				t.Fatalf("task %s sample %d: success %v rewards %v parts %v", g.TaskID, tr.Index, tr.Success, tr.Rewards, tr.Parts)
			}
		}
	}
	if len(ev.Tasks) != summary.NTasks || n != summary.NTrajectories {
		t.Errorf("browser holds %d tasks, %d trajectories; report.json says %d, %d", len(ev.Tasks), n, summary.NTasks, summary.NTrajectories)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// A run killed mid-write leaves half a line; a hand-edited file may hold garbage. The rest loads and
// each bad line is named by file and line.
func TestLoadBadLines(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"step": 1, "loss": 0.5, "reward": null}`,
		`not json`,
		`{"loss": 0.4}`,
		`{"step": 2, "loss": "high"}`,
		``,
		`{"step": 3, "loss": 0.3, "reward": 0.7}`,
		`{"step": 4, "loss": 0.`,
	}
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(r.Warnings); got != 4 {
		t.Fatalf("%d warnings, want 4: %v", got, r.Warnings)
	}
	for i, line := range []int{2, 3, 4, 7} {
		if want := filepath.Join(dir, "metrics.jsonl") + ":" + itoa(line) + ":"; !strings.HasPrefix(r.Warnings[i], want) {
			t.Errorf("warning %d = %q, want it to start with %q", i, r.Warnings[i], want)
		}
	}
	if len(r.Steps) != 2 || r.Steps[0] != 1 || r.Steps[1] != 3 {
		t.Fatalf("steps %v, want [1 3]", r.Steps)
	}
	if r.Series["reward"][0] != nil || *r.Series["reward"][1] != 0.7 || *r.Series["loss"][0] != 0.5 {
		t.Errorf("series %v", r.Series)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestLoadNothing(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("empty folder: error %v, want one naming the folder", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing folder loaded")
	}
}

func TestSpread(t *testing.T) {
	xs := make([]int, 100)
	for i := range xs {
		xs[i] = 10 * (i + 1)
	}
	got := spread(xs, 5)
	want := []int{10, 250, 500, 750, 1000}
	if len(got) != len(want) {
		t.Fatalf("spread = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("spread = %v, want %v", got, want)
		}
	}
	if got := spread(xs[:3], 5); len(got) != 3 {
		t.Errorf("spread of 3 = %v", got)
	}
}

func TestClip(t *testing.T) {
	s := strings.Repeat("é", MaxText) // 2 bytes each
	got := clip(s)
	if !strings.HasSuffix(got, " [... 4000 more bytes]") || !strings.HasPrefix(got, strings.Repeat("é", MaxText/2)) {
		t.Errorf("clip cut %q...%q", got[:10], got[len(got)-30:])
	}
	if clip("short") != "short" {
		t.Error("clip changed a short text")
	}
}
