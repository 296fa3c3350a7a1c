package train

import (
	"bytes"
	"io"
	"testing"
)

// Over keeps a config's key where the flag is not given and takes the
// flag's value where it is.
func TestInputsOver(t *testing.T) {
	cfg := Inputs{Model: "m", Tasks: "t.jsonl", Fixtures: "fx", DSN: "postgres://a", Engine: "xla"}
	if got := cfg.Over(Inputs{}); got != cfg {
		t.Errorf("no flags: %+v", got)
	}
	want := Inputs{Model: "m2", Tasks: "t.jsonl", Fixtures: "fx2", DSN: "postgres://a", Engine: "simplego"}
	if got := cfg.Over(Inputs{Model: "m2", Fixtures: "fx2", Engine: "simplego"}); got != want {
		t.Errorf("flags: %+v, want %+v", got, want)
	}
}

// LoadConfig puts the flags over a config file's keys (inputs, output_dir, bf16,
// max_steps when > 0), notes the keys that change nothing, and requires a
// file.
func TestLoadConfig(t *testing.T) {
	load := func(path string) (*fileConfig, error) {
		return &fileConfig{Arguments: Arguments{OutputDir: "runs/x", MaxSteps: 20},
			Inputs: Inputs{Model: "m", Tasks: "t.jsonl"}, ignored: []string{"fp16 (line 3)"}}, nil
	}
	var warn bytes.Buffer
	c, err := LoadConfig("x.yaml", load, Overrides{Inputs: Inputs{Model: "m2"}, OutputDir: "/tmp/o"}, &warn)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "m2" || c.Tasks != "t.jsonl" || c.OutputDir != "/tmp/o" || c.MaxSteps != 20 {
		t.Errorf("model %q, tasks %q, output dir %q, max steps %d: want the flags' m2 and /tmp/o over the file's t.jsonl and 20",
			c.Model, c.Tasks, c.OutputDir, c.MaxSteps)
	}
	if want := "note: x.yaml: TRL option fp16 (line 3) changes nothing in mcprl\n"; warn.String() != want {
		t.Errorf("notes %q, want %q", warn.String(), want)
	}
	if c, _ = LoadConfig("x.yaml", load, Overrides{MaxSteps: 3}, io.Discard); c.MaxSteps != 3 || c.OutputDir != "runs/x" {
		t.Errorf("--max-steps 3: max steps %d, output dir %q", c.MaxSteps, c.OutputDir)
	}
	if c, _ = LoadConfig("x.yaml", load, Overrides{BF16: true}, io.Discard); !c.BF16 {
		t.Error("--bf16: bf16 off")
	}
	if c, _ = LoadConfig("x.yaml", load, Overrides{}, io.Discard); c.BF16 {
		t.Error("no --bf16: bf16 on")
	}
	if _, err := LoadConfig("", load, Overrides{}, io.Discard); err == nil || err.Error() != "--config is required" {
		t.Errorf("no file: %v", err)
	}
}

// fileConfig is a RunConfig as grpo's and sft's are.
type fileConfig struct {
	Arguments
	Inputs
	ignored []string
}

func (c *fileConfig) RunParts() (*Arguments, *Inputs, []string) {
	return &c.Arguments, &c.Inputs, c.ignored
}
