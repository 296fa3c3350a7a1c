package rundir

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAcquireNamesTheHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir)
	var inUse *InUseError
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d on host ", os.Getpid())) {
		t.Fatalf("second Acquire: %v, want an InUseError naming pid %d", err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

// A lock held by another process is seen; it goes when that process dies
// (here: killed), without any cleanup.
func TestLockOfAnotherProcess(t *testing.T) {
	if os.Getenv("RUNDIR_HOLD") != "" {
		if _, err := Acquire(os.Getenv("RUNDIR_HOLD")); err != nil {
			os.Exit(2)
		}
		fmt.Println("held")
		time.Sleep(time.Minute)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockOfAnotherProcess$")
	cmd.Env = append(os.Environ(), "RUNDIR_HOLD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("holder: %q %v", buf, err)
	}
	_, err = Acquire(dir)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Errorf("Acquire while another process holds it: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after the holder died: %v", err)
	}
	l.Release()
}

func TestPreviousAndClear(t *testing.T) {
	dir := t.TempDir()
	if prev, err := Previous(filepath.Join(dir, "missing")); err != nil || prev != nil {
		t.Errorf("missing dir: %v %v", prev, err)
	}
	for _, d := range []string{"checkpoint-10", "checkpoint-20", "checkpoint-30.tmp", "final", "notes"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	for _, f := range []string{"metrics.jsonl", "skipped_tasks.txt", LockFile} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	prev, err := Previous(dir)
	if want := []string{"checkpoint-10", "checkpoint-20", "checkpoint-30.tmp", "final", "metrics.jsonl"}; err != nil || !reflect.DeepEqual(prev, want) {
		t.Errorf("Previous = %v %v, want %v", prev, err, want)
	}
	if err := Clear(dir); err != nil {
		t.Fatal(err)
	}
	if prev, _ := Previous(dir); len(prev) != 0 {
		t.Errorf("after Clear: %v", prev)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes")); err != nil {
		t.Errorf("Clear removed a folder no run wrote: %v", err)
	}
}
