package train

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A checkpoint is complete only once renamed into place with its
// trainer_state.json: a kill mid-write leaves a .tmp directory (or a
// directory without state) that resumption never picks.
func TestLatestCheckpointSkipsPartialWrites(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"checkpoint-2", "checkpoint-3.tmp", "checkpoint-4", "checkpoint-10x"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"checkpoint-2", "checkpoint-3.tmp", "checkpoint-10x"} {
		if err := os.WriteFile(filepath.Join(dir, d, "trainer_state.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := LatestCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "checkpoint-2"); got != want {
		t.Errorf("LatestCheckpoint = %q, want %q", got, want)
	}
	if got, err := LatestCheckpoint(filepath.Join(dir, "missing")); got != "" || err != nil {
		t.Errorf("LatestCheckpoint(missing dir) = %q, %v", got, err)
	}
}

// TestResumeMissingDir: --resume on a folder that does not exist is an
// error, and the folder is not made (it used to be, with an empty run.lock).
func TestResumeMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no-such-run")
	lock, _, err := ClaimOutputDir(dir, true, false)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		lock.Release()
		t.Fatalf("ClaimOutputDir(missing, resume): %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the missing folder was made: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, _, err := ClaimOutputDir(file, true, false); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("ClaimOutputDir(file, resume): %v", err)
	}
}
