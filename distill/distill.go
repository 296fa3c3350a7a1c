package distill

import (
	"context"
	"fmt"
	"strings"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/toolcall"
)

// Options bound a distillation.
type Options struct {
	// PerTask is how many distinct demonstrations of a task are kept at
	// most (default 1). The first keeps the task's id, the others get
	// "-2", "-3", ...
	PerTask int
}

// Stats count what happened to the sampled trajectories.
type Stats struct {
	Tasks, Trajectories int
	// Kept is the demonstrations written; TasksKept the tasks with at least
	// one.
	Kept, TasksKept int
	// Failed did not pass every assertion; Errors were ended by a failure
	// (a server's, a sandbox's); Unrepresentable passed but a golden cannot
	// reproduce them; Duplicates repeated a kept demonstration; OverLimit
	// passed beyond Options.PerTask.
	Failed, Errors, Unrepresentable, Duplicates, OverLimit int
}

func (s Stats) String() string {
	return fmt.Sprintf("%d of %d tasks got a demonstration; %d kept of %d trajectories (%d failed their assertions, %d ended by an error, %d not representable as a golden, %d duplicates, %d over the per-task limit)",
		s.TasksKept, s.Tasks, s.Kept, s.Trajectories, s.Failed, s.Errors, s.Unrepresentable, s.Duplicates, s.OverLimit)
}

// Run evaluates tasks with ev (its Config.Samples trajectories per task)
// and returns, in task order, a copy of each task per kept trajectory with
// that trajectory as its golden.
func Run(ctx context.Context, ev *eval.Evaluator, tasks []task.Task, opts Options) ([]task.Task, Stats, error) {
	samples, err := ev.Run(ctx, tasks)
	if err != nil {
		return nil, Stats{}, err
	}
	out, st := Select(samples, opts)
	st.Tasks = len(tasks)
	return out, st, nil
}

// Select keeps the samples that succeeded and that a golden reproduces,
// at most opts.PerTask distinct ones per task, in order.
func Select(samples []*eval.Sample, opts Options) ([]task.Task, Stats) {
	per := max(opts.PerTask, 1)
	var (
		st    Stats
		out   []task.Task
		count = map[*task.Task]int{}
		seen  = map[string]bool{}
	)
	for _, s := range samples {
		st.Trajectories++
		switch {
		case s.ScoreError != "" || s.Trajectory == nil || s.Trajectory.Error != "":
			st.Errors++
			continue
		case !s.Success():
			st.Failed++
			continue
		}
		golden, err := Golden(s.Trajectory)
		if err != nil {
			st.Unrepresentable++
			continue
		}
		t := *s.Task
		t.Golden = golden
		key := t.ID + "\x00" + fmt.Sprint(golden)
		if seen[key] {
			st.Duplicates++
			continue
		}
		if count[s.Task] >= per {
			st.OverLimit++
			continue
		}
		seen[key] = true
		count[s.Task]++
		if n := count[s.Task]; n > 1 {
			t.ID = fmt.Sprintf("%s-%d", t.ID, n)
		}
		if count[s.Task] == 1 {
			st.TasksKept++
		}
		st.Kept++
		out = append(out, t)
	}
	return out, st
}

// Golden writes a finished trajectory as a golden: per turn with a call,
// an assistant message (the text before the call as content) and the
// tool's result; then the final answer. It fails when the trajectory was
// truncated or ended by an error, or when task.GoldenTurns would not write
// its turns back exactly (a malformed call, text after a call).
func Golden(tr *chat.Trajectory) ([]chat.Message, error) {
	if tr.Error != "" {
		return nil, fmt.Errorf("trajectory ended by an error: %s", tr.Error)
	}
	if tr.Truncated {
		return nil, fmt.Errorf("trajectory was truncated")
	}
	if len(tr.Turns) == 0 {
		return nil, fmt.Errorf("trajectory has no turns")
	}
	var msgs []chat.Message
	want := make([]string, 0, len(tr.Turns))
	for k, turn := range tr.Turns {
		last := k == len(tr.Turns)-1
		if last {
			if len(turn.Calls) > 0 {
				return nil, fmt.Errorf("turn %d: the last turn calls a tool", k+1)
			}
			msgs = append(msgs, chat.Message{Role: "assistant", Content: turn.Text})
			want = append(want, turn.Text+"<|im_end|>")
			continue
		}
		if len(turn.Calls) != 1 || turn.Calls[0].ParseError != "" {
			return nil, fmt.Errorf("turn %d: %d calls, want one well-formed call", k+1, len(turn.Calls))
		}
		c := turn.Calls[0]
		content, _, _ := strings.Cut(turn.Text, toolcall.OpenTag)
		content = strings.TrimSuffix(content, "\n")
		msgs = append(msgs,
			chat.Message{Role: "assistant", Content: content, ToolCalls: []chat.Call{c.Call}},
			chat.Message{Role: "tool", Name: c.Call.Name, Content: c.Text})
		want = append(want, turn.Text)
	}
	got, err := task.GoldenTurns(&task.Task{Golden: msgs}, toolcall.RenderCall)
	if err != nil {
		return nil, err
	}
	if len(got) != len(want) {
		return nil, fmt.Errorf("a golden does not reproduce the trajectory's turns")
	}
	for i := range got {
		if got[i] != want[i] {
			return nil, fmt.Errorf("turn %d: a golden writes %q, the trajectory has %q", i+1, got[i], want[i])
		}
	}
	return msgs, nil
}
