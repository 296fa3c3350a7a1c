package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/reward"
)

// Every command's usage, short and long help are its file help/NAME.txt
// (NAME: the command's path below mcprl joined by "-"; score's with the
// rewards listed where it says rewardsHelp), and every file in help/ is
// exactly one command's: a command whose help is written in Go or loaded
// from another command's file, an empty help, and a stale or misnamed file
// each fail.
func TestHelpFromFiles(t *testing.T) {
	used := map[string]int{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		name := strings.TrimPrefix(strings.ReplaceAll(c.CommandPath(), " ", "-"), "mcprl-")
		text, err := os.ReadFile("help/" + name + ".txt")
		if err != nil {
			t.Errorf("%s: %v", c.CommandPath(), err)
		}
		lines := strings.SplitN(strings.TrimSuffix(string(text), "\n"), "\n", 4)
		if len(lines) < 4 || lines[2] != "" {
			t.Errorf("help/%s.txt: want its usage, its short description, a blank line and its long help", name)
			lines = append(lines, "", "", "", "")
		}
		want := strings.Replace(lines[3], rewardsHelp, reward.NewRegistry().Help(), 1)
		switch {
		case c.Use != lines[0] || c.Short != lines[1]:
			t.Errorf("%s: usage %q and short %q are not help/%s.txt's first two lines", c.CommandPath(), c.Use, c.Short, name)
		case strings.TrimSpace(c.Long) == "":
			t.Errorf("%s: no long help", c.CommandPath())
		case c.Long != want:
			t.Errorf("%s: long help is not help/%s.txt:\n%s", c.CommandPath(), name, c.Long)
		case strings.Contains(c.Long, rewardsHelp):
			t.Errorf("%s: %s left in the help", c.CommandPath(), rewardsHelp)
		}
		used[name+".txt"]++
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	if len(used) < 20 {
		t.Fatalf("walked %d commands: %v", len(used), used)
	}
	entries, err := os.ReadDir("help")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if used[e.Name()] != 1 {
			t.Errorf("help/%s is the help of %d commands, want 1", e.Name(), used[e.Name()])
		}
	}
}
