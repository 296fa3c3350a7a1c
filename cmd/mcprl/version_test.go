package main

import (
	"runtime"
	"strings"
	"testing"
)

func TestVersionFlag(t *testing.T) {
	cmd := newRootCmd()
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "mcprl ") || !strings.Contains(got, runtime.Version()) {
		t.Errorf("mcprl --version printed %q, want mcprl, the build and the Go version", got)
	}
}
