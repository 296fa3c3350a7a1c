package model

import (
	"os"
	"testing"
)

// TestReleaseMemory: ReleaseMemory runs anywhere, and finds glibc's malloc_trim where glibc is the C library.
func TestReleaseMemory(t *testing.T) {
	ReleaseMemory()
	ReleaseMemory()
	for _, libc := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6"} {
		if _, err := os.Stat(libc); err == nil && trim == nil {
			t.Errorf("glibc (%s) is here but its malloc_trim was not found", libc)
		}
	}
}
