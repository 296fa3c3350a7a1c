package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxCommandLines bounds the non-test lines of this package: the command is
// flags, reading and writing files, and printing; what a command does lives
// in the package that owns the concept. Issue 32 asks for 1,200 at most. It
// was reached by moving logic out (eval.Runner for chat, Config.Summary and
// LoRAConfig.String for what model init, info, import and merge print,
// ScoringConfig.ScoreFile for score), each command's usage and short help
// into its help file beside its long help (command), the shared inputs'
// flags registered once (runFlags.registerInputs), train and sft sharing
// openRun, and a file per group of commands rather than one per command.
const maxCommandLines = 1200

// TestCommandStaysThin: cmd/mcprl's non-test Go files hold at most
// maxCommandLines lines, so that domain logic moved out of it stays out.
func TestCommandStaysThin(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total, counts := 0, map[string]int{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		counts[f] = bytes.Count(b, []byte("\n"))
		total += counts[f]
	}
	if len(counts) < 10 {
		t.Fatalf("found %d Go files: %v", len(counts), files)
	}
	if total > maxCommandLines {
		t.Errorf("cmd/mcprl has %d non-test lines, more than %d: move what a command does (not its flags, files and printing) to the package that owns it; by file: %v",
			total, maxCommandLines, counts)
	}
}
