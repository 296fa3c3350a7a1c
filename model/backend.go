package model

import (
	"fmt"
	"os"
	"runtime"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/mcprl/mcprl/internal/kernels"
)

// DefaultBackendConfig is the pure-Go (simplego) backend configuration NewBackend uses: ops run one at a time,
// each large one (DotGeneral) split across all cores. simplego's default also runs independent ops in parallel:
// with two or more DotGenerals ready at once on few cores its worker pool deadlocks (v0.26: every worker blocks in
// WaitToStart; "ops_parallel" the same), and it hung about one short GRPO run in three (all goroutines waiting in
// executeParallel), without being faster on these graphs.
const DefaultBackendConfig = "ops_sequential"

// NewBackend returns the pure-Go GoMLX backend (nothing to download) tuned for this package's graphs: the
// simplego engine (OpenEngine picks between it and XLA). Its hot float32 elementwise, reduction and layout ops run
// on internal/kernels' Go loops, and its float32 matmuls on the machine's OpenBLAS when one is installed
// (libopenblas0; see MatmulEngine), on simplego's own Go kernel otherwise.
// config "" means DefaultBackendConfig; otherwise it is simplego's comma-separated option list.
// $GOMLX_BACKEND, when set and config is "", names the engine instead, as it does for auto (see Engine):
// GOMLX_BACKEND=xla runs every test and benchmark built on NewBackend on XLA.
func NewBackend(config string) (backends.Backend, error) {
	if config == "" && os.Getenv(backends.ConfigEnvVar) != "" {
		eb, err := OpenEngine(EngineAuto)
		if err != nil {
			return nil, err
		}
		return eb.Backend, nil
	}
	return newSimpleGo(config)
}

// newSimpleGo is NewBackend's simplego backend, whatever $GOMLX_BACKEND says.
func newSimpleGo(config string) (backends.Backend, error) {
	if config == "" {
		config = DefaultBackendConfig
	}
	kernels.Install() //nolint:errcheck // on failure simplego keeps its own executors; MatmulEngine and ElementwiseEngine say which run
	b, err := simplego.New(config)
	if err != nil {
		return nil, fmt.Errorf("simplego backend %q: %w", config, err)
	}
	return b, nil
}

// MatmulEngine says what runs the float32 matmuls of NewBackend's backends: OpenBLAS and its library, or
// simplego's Go kernel and why OpenBLAS is not used ($MCPRL_OPENBLAS=off disables it).
func MatmulEngine() string {
	lib, err := kernels.OpenBLAS()
	if err != nil {
		return fmt.Sprintf("simplego Go kernel (%v)", err)
	}
	return fmt.Sprintf("OpenBLAS %s (one thread per call, calls split across %d cores)", lib.Path, runtime.GOMAXPROCS(0))
}

// OpenBLASMissing reports why the float32 matmuls of NewBackend's backends do not run on OpenBLAS
// (not installed, or disabled by $MCPRL_OPENBLAS=off), or nil when they do.
func OpenBLASMissing() error {
	_, err := kernels.OpenBLAS()
	return err
}

// ElementwiseEngine says what runs the float32 elementwise ops, reductions and transposes of NewBackend's
// backends: internal/kernels' Go kernels (with AVX2 or scalar), or simplego's own executors and why.
func ElementwiseEngine() string {
	if err := kernels.Install(); err != nil {
		return fmt.Sprintf("simplego (%v)", err)
	}
	if kernels.AVX2() {
		return "Go kernels, AVX2"
	}
	return "Go kernels, scalar (no AVX2 and FMA on this CPU)"
}

// GradientEngine says what differentiates DotGeneral in the training graphs: internal/kernels' two-DotGeneral
// gradient, or GoMLX's own and why (a GoMLX other than the pinned one, or no model built yet).
func GradientEngine() string { return kernels.DotGradientEngine() }
