package lint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cappedBuffer keeps the first max bytes written to it and counts the rest.
type cappedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
	} else {
		if room > 0 {
			c.buf.Write(p[:room])
		}
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

// findingLine matches the common "file:line[:col]: message" output form.
var findingLine = regexp.MustCompile(`^(?:[^:\s]+):(\d+)(?::(\d+))?:\s*(.+)$`)

// runCommand runs an external linter on rel inside the workspace.
func (l *Linter) runCommand(ctx context.Context, c Command, rel string) (*Result, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	argv := make([]string, 0, len(c.Argv)+1)
	substituted := false
	for _, a := range c.Argv {
		if strings.Contains(a, "{path}") {
			a = strings.ReplaceAll(a, "{path}", rel)
			substituted = true
		}
		argv = append(argv, a)
	}
	if !substituted {
		argv = append(argv, rel)
	}
	home, err := os.MkdirTemp("", "mcprl-lint-")
	if err != nil {
		return nil, fmt.Errorf("lint: temp dir: %w", err)
	}
	defer os.RemoveAll(home)

	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Dir = l.dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + home,
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
	}
	cmd.Stdin = nil
	out := &cappedBuffer{max: l.opts.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second // a grandchild holding the output pipe cannot block Wait

	runErr := cmd.Run()
	if cmd.Process != nil {
		// Whatever the linter left running in its process group goes too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	res := &Result{Path: rel, Linter: strings.Join(c.Argv, " ")}
	res.Output = strings.ToValidUTF8(out.buf.String(), "\uFFFD")
	res.Truncated = out.dropped > 0
	var exitErr *exec.ExitError
	switch {
	case runCtx.Err() != nil && ctx.Err() == nil:
		res.TimedOut = true
		res.ExitCode = ExitTimeout
		res.Output += fmt.Sprintf("\nlinter timed out after %s", timeout)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("lint: %s: %w", argv[0], ctx.Err())
	case runErr == nil:
		res.ExitCode = 0
	case errors.As(runErr, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if res.ExitCode < 0 { // killed by a signal
			res.ExitCode = 128 + int(exitErr.Sys().(syscall.WaitStatus).Signal())
		}
	case errors.Is(runErr, exec.ErrWaitDelay):
		res.ExitCode = cmd.ProcessState.ExitCode()
	default:
		// The command could not start: a fixture configuration problem the
		// model cannot fix, reported as a refusal it can read.
		return nil, &RefusalError{Path: rel, Reason: fmt.Sprintf("linter %q could not run: %v", argv[0], runErr)}
	}
	for _, line := range strings.Split(res.Output, "\n") {
		if m := findingLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			n, _ := strconv.Atoi(m[1])
			col, _ := strconv.Atoi(m[2])
			res.Findings = append(res.Findings, Finding{Line: n, Column: col, Message: m[3]})
		}
	}
	return res, nil
}
