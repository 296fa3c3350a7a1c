// Command xla-cuda-install installs XLA's CUDA PJRT plugin and the NVIDIA libraries it loads, with GoMLX's own
// installer (github.com/gomlx/go-xla/pkg/installer): from PyPI's jax-cuda12-pjrt (or jax-cuda13-pjrt) wheel of
// the given version and the nvidia-* wheels it depends on, each checked against PyPI's SHA-256, into
// ~/.local/lib/go-xla/nvidia/, where GoMLX's plugin search finds the plugin "cuda" (engine: xla:cuda, or
// GOMLX_BACKEND=xla:cuda). scripts/check-gpu.sh runs it; nothing else downloads a plugin.
//
//	go run ./internal/cmd/xla-cuda-install [-plugin cuda12|cuda13] [-version 0.11.2] [-dir ~/.local/lib/go-xla]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gomlx/go-xla/pkg/installer"
)

func main() {
	plugin := flag.String("plugin", "cuda12", "cuda12 (jax-cuda12-pjrt, CUDA 12 drivers) or cuda13 (jax-cuda13-pjrt)")
	// 0.11.2: the XLA of JAX 0.11.2, as the CPU plugin scripts/install-xla.sh installs (PJRT API v0.115).
	version := flag.String("version", "0.11.2", "version of the jax-cudaNN-pjrt wheel")
	dir := flag.String("dir", "", "the go-xla folder to install into (default ~/.local/lib/go-xla)")
	flag.Parse()
	if *dir == "" {
		lib, err := installer.DefaultHomeLibPath()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		*dir = lib + "/go-xla"
	}
	if err := installer.CudaInstall(*plugin, *version, *dir, true, installer.Normal); err != nil {
		fmt.Fprintf(os.Stderr, "xla-cuda-install: %v\n", err)
		os.Exit(1)
	}
}
