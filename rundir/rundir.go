package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"
)

// LockFile is the name of the lock file in a run folder.
const LockFile = "run.lock"

// Lock is a held run folder.
type Lock struct {
	f *os.File
}

// InUseError reports that another process holds the folder.
type InUseError struct {
	Dir    string
	Holder string // what the holder wrote: pid, host, start time, command
}

func (e *InUseError) Error() string {
	h := strings.TrimSpace(e.Holder)
	if h == "" {
		h = "another process (it wrote nothing about itself)"
	}
	return fmt.Sprintf("output dir %s is in use by %s; wait for that run to end, or use another --output-dir", e.Dir, h)
}

// Acquire creates dir if needed and locks it for this process. If another
// process (or another Acquire in this one) holds it, the error is an
// *InUseError naming the holder. The lock lasts until Release or the
// process's end.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("output dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &InUseError{Dir: dir, Holder: string(holder)}
		}
		return nil, fmt.Errorf("output dir lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	info := fmt.Sprintf("pid %d on host %s since %s (%s)\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339), strings.Join(os.Args, " "))
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(info), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the folder up. The lock file stays (an empty one is no
// lock: only a live process's flock is).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // closing drops the flock
	l.f = nil
	return err
}

// runOutput matches what a run writes into its folder (checkpoints are
// written under NAME.tmp first).
var runOutput = regexp.MustCompile(`^((checkpoint-\d+|final)(\.tmp)?|metrics\.jsonl)$`)

// Previous lists, sorted, what an earlier run left in dir: checkpoint-STEP
// folders (complete or not), final/ and metrics.jsonl. A missing dir has none.
func Previous(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("output dir: %w", err)
	}
	var out []string
	for _, e := range entries {
		if runOutput.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Clear removes what Previous lists from dir (the caller holds its Lock).
func Clear(dir string) error {
	prev, err := Previous(dir)
	if err != nil {
		return err
	}
	for _, name := range prev {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("overwrite output dir: %w", err)
		}
	}
	return nil
}
