package inputs_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/train"
)

const (
	fixturesDir = "../examples/fixtures"
	quickTasks  = "../examples/customers/quick_tasks.jsonl"
	quickModel  = "../examples/customers/base"
)

func small(t *testing.T) (*tokenizer.Tokenizer, *tokenizer.Template) {
	t.Helper()
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	return tok, tpl
}

// Load opens the quick example's model with its tokenizer and template,
// reads its tasks and starts the one fixture they use.
func TestLoadModelAndTasks(t *testing.T) {
	var warn bytes.Buffer
	l, err := inputs.Load(context.Background(), inputs.Options{Inputs: train.Inputs{Model: quickModel, Tasks: quickTasks, Fixtures: fixturesDir}, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Model == nil || l.Tokenizer == nil || l.Template == nil || l.ModelDir != quickModel {
		t.Fatalf("loaded model %v, tokenizer %v, template %v, dir %q", l.Model != nil, l.Tokenizer != nil, l.Template != nil, l.ModelDir)
	}
	if l.Model.Config.VocabSize != l.Tokenizer.VocabSize() {
		t.Errorf("model vocab %d, tokenizer vocab %d", l.Model.Config.VocabSize, l.Tokenizer.VocabSize())
	}
	if len(l.Tasks) != 8 || len(l.Skipped) != 0 {
		t.Errorf("%d tasks, %d skipped; want 8 and 0", len(l.Tasks), len(l.Skipped))
	}
	if len(l.Sandboxes) != 1 || l.Sandboxes["customers"] == nil {
		t.Errorf("sandboxes %v, want customers only", l.Sandboxes)
	}
	for i, j := range l.Jobs() {
		if j.Task != &l.Tasks[i] || j.Factory != l.Sandboxes["customers"] {
			t.Errorf("job %d: task %p factory %p, want task %d with the customers factory", i, j.Task, j.Factory, i)
		}
	}
	if !strings.HasPrefix(warn.String(), "engine: ") || l.Engine == nil || !strings.Contains(warn.String(), "DotGeneral gradient: ") {
		t.Errorf("warnings %q: want the engine line first", warn.String())
	}
	if _, err := inputs.Load(context.Background(), inputs.Options{Inputs: train.Inputs{Model: t.TempDir(), Tasks: quickTasks, Fixtures: fixturesDir}}); err == nil {
		t.Error("an empty model directory loaded")
	}
}

// Bad task lines fail the load, each listed by line; SkipBad skips them,
// counts them to Warn and WriteSkipped keeps them in skipped_tasks.txt.
func TestLoadTasksBadLines(t *testing.T) {
	tok, tpl := small(t)
	good, err := os.ReadFile(quickTasks)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	lines := strings.SplitAfter(string(good), "\n")
	bad := lines[0] + "{not json\n" + lines[1] + `{"id": "x", "task": "t", "fixture": "nowhere"}` + "\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = inputs.LoadTasks(ctx, tok, tpl, inputs.Options{Inputs: train.Inputs{Tasks: path, Fixtures: fixturesDir}})
	if err == nil || !strings.Contains(err.Error(), path+":2") || !strings.Contains(err.Error(), path+":4") {
		t.Fatalf("strict load: %v; want lines 2 and 4 named", err)
	}
	var warn bytes.Buffer
	l, err := inputs.LoadTasks(ctx, tok, tpl, inputs.Options{Inputs: train.Inputs{Tasks: path, Fixtures: fixturesDir}, SkipBad: true, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(l.Tasks) != 2 || len(l.Skipped) != 2 || l.Model != nil || l.Tokenizer != tok {
		t.Errorf("%d tasks, %d skipped, model %v; want 2, 2, none", len(l.Tasks), len(l.Skipped), l.Model)
	}
	if !strings.Contains(warn.String(), "warning: --skip-bad-tasks:") {
		t.Errorf("warnings %q", warn.String())
	}
	out := t.TempDir()
	if err := l.WriteSkipped(out); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "skipped_tasks.txt")); err != nil || !strings.Contains(string(b), ":2") {
		t.Errorf("skipped_tasks.txt: %q, %v", b, err)
	}
}

func TestLoadTasksNeedsFiles(t *testing.T) {
	tok, tpl := small(t)
	if _, err := inputs.LoadTasks(context.Background(), tok, tpl, inputs.Options{Inputs: train.Inputs{Tasks: quickTasks}}); err == nil {
		t.Error("loaded without a fixtures directory")
	}
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := inputs.LoadTasks(context.Background(), tok, tpl, inputs.Options{Inputs: train.Inputs{Tasks: empty, Fixtures: fixturesDir}}); err == nil || !strings.Contains(err.Error(), "no usable tasks") {
		t.Errorf("empty tasks file: %v", err)
	}
}

// A missing model, tasks file or fixtures directory fails before anything loads (no engine line), saying
// which config key or flag gives it.
func TestLoadSaysWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	noTasks := "set tasks and fixtures in the config or pass --tasks and --fixtures"
	for _, c := range []struct {
		load func(inputs.Options) (*inputs.Loaded, error)
		in   train.Inputs
		want string
	}{
		{func(o inputs.Options) (*inputs.Loaded, error) { return inputs.Load(ctx, o) }, train.Inputs{Tasks: quickTasks, Fixtures: fixturesDir},
			"no model: set model in the config or pass --model"},
		{func(o inputs.Options) (*inputs.Loaded, error) { return inputs.Load(ctx, o) }, train.Inputs{Model: "m", Tasks: quickTasks}, noTasks},
		{func(o inputs.Options) (*inputs.Loaded, error) { return inputs.LoadTasksWith(ctx, "no/such/dir", o) }, train.Inputs{Fixtures: fixturesDir}, noTasks},
	} {
		var warn strings.Builder
		if _, err := c.load(inputs.Options{Inputs: c.in, Warn: &warn}); err == nil || err.Error() != c.want || warn.Len() > 0 {
			t.Errorf("%+v: error %v, notes %q; want %q and no notes", c.in, err, warn.String(), c.want)
		}
	}
}

// LoadTasksWith loads the embedded small tokenizer for "" and a model
// folder's for its directory, then the tasks; a folder without tokenizer
// files fails.
func TestLoadTasksWith(t *testing.T) {
	ctx := context.Background()
	o := inputs.Options{Inputs: train.Inputs{Tasks: quickTasks, Fixtures: fixturesDir}}
	for _, dir := range []string{"", quickModel} {
		l, err := inputs.LoadTasksWith(ctx, dir, o)
		if err != nil {
			t.Fatalf("%q: %v", dir, err)
		}
		if l.Model != nil || l.Tokenizer == nil || l.Template == nil || len(l.Tasks) == 0 || len(l.Sandboxes) == 0 {
			t.Errorf("%q: loaded %+v", dir, l)
		}
		l.Close()
	}
	if _, err := inputs.LoadTasksWith(ctx, t.TempDir(), o); err == nil || !strings.Contains(err.Error(), "inputs: tokenizer") {
		t.Errorf("no tokenizer files: %v", err)
	}
}
