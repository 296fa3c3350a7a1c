package model

import (
	"sync"

	"github.com/ebitengine/purego"
)

var (
	trimOnce sync.Once
	trim     func(pad uintptr) int32 // glibc's malloc_trim; nil where the C library has none
)

// ReleaseMemory hands the memory that the C allocator holds free back to the operating system: glibc's
// malloc_trim(0), found at run time (without it, as with another C library, it does nothing).
//
// XLA's CPU runtime allocates the buffers of each graph call with malloc and frees them when the call ends. glibc
// serves a request below its mmap threshold from its heaps, and raises that threshold (up to 32 MiB) each time it
// frees a larger mapped block, so after a while the decoding steps' buffers come from the heaps, whose freed pages
// stay in the process, scattered between live allocations: an XLA GRPO process of SmolLM2 held 1.0-2.7 GB between
// optimizer steps with glibc's threshold fixed at 128 KiB and 2.0-4.3 GB without, and every step's own buffer
// came on top (docs/benchmarks.md, "Memory"). malloc_trim returns every free page of every heap (madvise), which
// no allocation then has to pay for; the GRPO trainer calls it between its phases, where a few milliseconds do
// not matter.
func ReleaseMemory() {
	trimOnce.Do(func() {
		for _, name := range []string{"libc.so.6", "libc.so"} {
			h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err != nil {
				continue
			}
			if _, err := purego.Dlsym(h, "malloc_trim"); err == nil {
				purego.RegisterLibFunc(&trim, h, "malloc_trim")
				return
			}
		}
	})
	if trim != nil {
		trim(0)
	}
}
