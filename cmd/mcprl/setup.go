package main

import (
	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/train"
)

// runFlags are the shared command-line shapes of train, sft and eval.
type runFlags struct {
	config                  string
	over                    train.Overrides // --model, --tasks, --fixtures, --dsn, --output-dir, --max-steps
	skipBadTasks, overwrite bool
}

func (f *runFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "YAML config with TRL GRPOConfig/TrainingArguments names (required)")
	fl.StringVar(&f.over.Model, "model", "", "HF-format model directory with tokenizer files (overrides the config's model)")
	fl.StringVar(&f.over.Tasks, "tasks", "", "tasks JSONL file (overrides the config's tasks)")
	fl.StringVar(&f.over.Fixtures, "fixtures", "", "directory of fixtures, each named by a task's \"fixture\" (overrides the config's fixtures)")
	fl.StringVar(&f.over.OutputDir, "output-dir", "", "where checkpoints, metrics.jsonl and final/ go (overrides output_dir)")
	fl.StringVar(&f.over.DSN, "dsn", "", "PostgreSQL DSN for the sandboxes' databases (default: the config's dsn, else embedded SQLite)")
	fl.IntVar(&f.over.MaxSteps, "max-steps", 0, "optimizer steps to run (overrides max_steps when > 0)")
	fl.BoolVar(&f.over.BF16, "bf16", false, "run the model in bfloat16: frozen weights stored in bfloat16, the linear layers' matmuls on bfloat16 inputs (engine xla; turns the config's bf16 on)")
	fl.BoolVar(&f.overwrite, "overwrite_output_dir", false, "start over in an output dir that holds an earlier run's checkpoints, final/ and metrics.jsonl (they are deleted); TRL's name")
	fl.BoolVar(&f.skipBadTasks, "skip-bad-tasks", false, "skip bad lines of the tasks file (listed, counted and written to skipped_tasks.txt in the output dir) instead of failing")
}
