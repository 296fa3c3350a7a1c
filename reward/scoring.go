package reward

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// ScoringConfig names what `mcprl score` scores completions with; the
// messages of OpenCompletions name its flags.
type ScoringConfig struct {
	// Rewards are comma-separated NAME or NAME:WEIGHT (Registry.Parse).
	Rewards string
	// TasksPath is the tasks JSONL that task_ids name ("": any task_id is
	// accepted); a task without an id gets its line number.
	TasksPath string
	// FixturesDir is the directory of fixture directories the tasks fork,
	// needed with TasksPath when a reward runs tool calls (NeedsSandbox).
	FixturesDir string
	// DSN selects the sandboxes' database ("": embedded SQLite).
	DSN string
	// Workers is the number of completions scored in parallel (0: CPUs).
	Workers int
	// MCPRewardConfig is a JSON file of compute_mcp_reward settings
	// (ReadMCPRewardFile), applied to the rewards; "" for none.
	MCPRewardConfig string
}

// ScoreFile scores the completions JSONL at path ("-": stdin) with what c
// describes (OpenCompletions): a JSON line per completion to stdout, in
// input order, problems to stderr. It is what mcprl score does.
func (c ScoringConfig) ScoreFile(ctx context.Context, path string, stdin io.Reader, stdout, stderr io.Writer) error {
	sc, err := OpenCompletions(c)
	if err != nil {
		return err
	}
	defer sc.Close()
	in, name := stdin, "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("read completions: %w", err)
		}
		defer f.Close()
		in, name = f, path
	}
	return sc.Score(ctx, in, name, stdout, stderr)
}

// OpenCompletions builds the Completions c describes: the parsed rewards,
// the tasks by id, the compute_mcp_reward settings applied and, when a
// reward runs tool calls, a sandbox factory per fixture to fork. Close
// frees the factories.
func OpenCompletions(c ScoringConfig) (*Completions, error) {
	fn, err := NewRegistry().Parse(c.Rewards)
	if err != nil {
		return nil, err
	}
	sc := &Completions{Func: fn, Tasks: map[string]*task.Task{}, Workers: c.Workers}
	fixtures := map[string]*task.Fixture{}
	if c.FixturesDir != "" {
		if fixtures, err = task.LoadFixtures(c.FixturesDir); err != nil {
			return nil, err
		}
	}
	if c.TasksPath != "" {
		ts, err := task.Load(c.TasksPath, task.LoadOptions{Fixtures: fixtures, Check: CheckTask})
		if err != nil {
			return nil, err
		}
		for i := range ts {
			t := &ts[i]
			if t.ID == "" {
				t.ID = strconv.Itoa(i + 1)
			}
			sc.Tasks[t.ID] = t
		}
	}
	if c.MCPRewardConfig != "" {
		sf, err := ReadMCPRewardFile(c.MCPRewardConfig)
		if err != nil {
			return nil, err
		}
		if err := sf.Apply(fn); err != nil {
			return nil, fmt.Errorf("--mcp-reward-config: %w", err)
		}
	}
	if NeedsSandbox(fn) {
		if c.TasksPath == "" || c.FixturesDir == "" {
			return nil, fmt.Errorf("reward %q runs tool calls against the task's sandbox: give --tasks and --fixtures", c.Rewards)
		}
		fs := sandbox.NewFactories(fixtures, sandbox.Options{DSN: c.DSN})
		sc.factories = fs
		sc.Fork = func(ctx context.Context, t *task.Task) (LiveSandbox, error) { return fs.Fork(ctx, t) }
	}
	return sc, nil
}

// Close frees the sandbox factories OpenCompletions started, if any.
func (s *Completions) Close() error {
	if s.factories == nil {
		return nil
	}
	return s.factories.Close()
}

// Help lists the registry's rewards, one "\n  NAME  doc" line each: the
// rewards part of a command's help.
func (r *Registry) Help() string {
	var b bytes.Buffer
	for _, n := range r.Names() {
		fmt.Fprintf(&b, "\n  %-15s %s", n, r.Doc(n))
	}
	return b.String()
}
