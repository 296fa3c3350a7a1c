package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// Agent answers questions about one fixture.
type Agent struct {
	// Runner runs the rollouts (its NumGenerations is ignored: one
	// trajectory per question).
	Runner *rollout.Runner
	// Sandbox is the fixture's sandbox factory; each question gets a fork.
	Sandbox *sandbox.Factory
	// SystemPrompt, when set, is the system message; otherwise the chat
	// template's tool section shows the sandbox's tools.
	SystemPrompt string
}

// Ask runs one question to its end and returns the trajectory.
func (a *Agent) Ask(ctx context.Context, question string) (*chat.Trajectory, error) {
	question = strings.TrimSpace(question)
	if question == "" {
		return nil, errors.New("agent: empty question")
	}
	r := *a.Runner
	r.Config.NumGenerations = 1
	t := &task.Task{ID: "chat", Task: question, SystemPrompt: a.SystemPrompt}
	trajs, err := r.Run(ctx, []rollout.Job{{Task: t, Factory: a.Sandbox}})
	if err != nil {
		return nil, err
	}
	return trajs[0].Trajectory, nil
}

// Converse asks the questions read from in, one a line, each in a rollout
// of its own (no shared conversation or database fork), and writes each
// question and its Transcript to out. Before each read it writes "> " to
// prompt. Blank lines are skipped; "exit", "quit" or the end of in stop it.
func (a *Agent) Converse(ctx context.Context, in io.Reader, out, prompt io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	for {
		fmt.Fprint(prompt, "> ")
		if !sc.Scan() {
			fmt.Fprintln(prompt)
			return sc.Err()
		}
		q := strings.TrimSpace(sc.Text())
		switch q {
		case "":
			continue
		case "exit", "quit":
			return nil
		}
		fmt.Fprintf(out, "question: %s\n", q)
		tr, err := a.Ask(ctx, q)
		if err != nil {
			return err
		}
		if err := Transcript(out, tr); err != nil {
			return err
		}
	}
}

// Transcript writes a trajectory for a reader: each turn's text before its
// calls, each call with its arguments and the tool's result (or why it
// could not be parsed), then the answer, and how the trajectory ended when
// it did not end with an answer.
func Transcript(w io.Writer, tr *chat.Trajectory) error {
	var b strings.Builder
	for _, turn := range tr.Turns {
		if len(turn.Calls) == 0 {
			continue
		}
		if pre, _, ok := strings.Cut(turn.Text, "<tool_call>"); ok && strings.TrimSpace(pre) != "" {
			fmt.Fprintf(&b, "  %s\n", strings.TrimSpace(pre))
		}
		for _, c := range turn.Calls {
			if c.ParseError != "" {
				fmt.Fprintf(&b, "call (malformed): %s\n", c.ParseError)
				continue
			}
			fmt.Fprintf(&b, "call: %s %s\n", c.Call.Name, c.Call.Arguments)
			label := "result"
			if c.IsError {
				label = "result (error)"
			}
			fmt.Fprintf(&b, "%s:\n%s\n", label, indent(c.Text))
		}
	}
	switch {
	case tr.Error != "":
		fmt.Fprintf(&b, "stopped: %s\n", tr.Error)
	case tr.Truncated:
		fmt.Fprintf(&b, "stopped: out of budget (max_completion_length or max_tool_calling_iterations)\n")
		if tr.Answer != "" {
			fmt.Fprintf(&b, "partial answer: %s\n", tr.Answer)
		}
	default:
		fmt.Fprintf(&b, "answer: %s\n", tr.Answer)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
