package train

import (
	"os"
	"path/filepath"
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
