package train

import (
	"errors"
	"fmt"
	"io"
)

// Over returns in with every field over sets (a non-empty one) in place of
// in's: a command's flags over a config's keys.
func (in Inputs) Over(over Inputs) Inputs {
	for _, f := range []struct{ dst, src *string }{
		{&in.Model, &over.Model}, {&in.Tasks, &over.Tasks}, {&in.Fixtures, &over.Fixtures}, {&in.DSN, &over.DSN},
		{(*string)(&in.Engine), (*string)(&over.Engine)}, {(*string)(&in.SamplingEngine), (*string)(&over.SamplingEngine)},
	} {
		if *f.src != "" {
			*f.dst = *f.src
		}
	}
	return in
}

// Overrides are what a command's flags put over a run config's keys: the
// inputs (Over), output_dir when given, max_steps when > 0 and bf16 when
// set (--bf16 turns it on; a config's bf16: true stays on).
type Overrides struct {
	Inputs
	OutputDir string
	MaxSteps  int
	BF16      bool
}

// RunConfig is a trainer's config file (grpo.Config, sft.Config): it inlines
// the TrainingArguments and the Inputs, and lists the keys found in its file
// that change nothing in mcprl.
type RunConfig interface {
	RunParts() (args *Arguments, in *Inputs, ignored []string)
}

// LoadConfig is the one home of "a config file plus flag overrides": it
// reads the config file at path with load (grpo.Load, sft.Load), puts o over
// it and notes to warn each of the file's keys that changes nothing.
func LoadConfig[C RunConfig](path string, load func(string) (C, error), o Overrides, warn io.Writer) (C, error) {
	var cfg C
	if path == "" {
		return cfg, errors.New("--config is required")
	}
	cfg, err := load(path)
	if err != nil {
		return cfg, err
	}
	args, in, ignored := cfg.RunParts()
	*in = in.Over(o.Inputs)
	if o.OutputDir != "" {
		args.OutputDir = o.OutputDir
	}
	if o.MaxSteps > 0 {
		args.MaxSteps = o.MaxSteps
	}
	if o.BF16 {
		args.BF16 = true
	}
	for _, k := range ignored {
		fmt.Fprintf(warn, "note: %s: TRL option %s changes nothing in mcprl\n", path, k)
	}
	return cfg, nil
}
