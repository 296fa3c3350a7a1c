package kernels

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// EnvLibrary names the environment variable that overrides the OpenBLAS shared library's path; "off" disables
// OpenBLAS.
const EnvLibrary = "MCPRL_OPENBLAS"

// libraryNames are tried in order when $MCPRL_OPENBLAS is unset (Debian's libopenblas0 provides the first).
var libraryNames = []string{"libopenblas.so.0", "libopenblas.so", "libopenblas.dylib"}

const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// Lib is a loaded OpenBLAS.
type Lib struct {
	Path  string // the shared library that was loaded
	sgemm func(order, transA, transB, m, n, k int32, alpha float32, a unsafe.Pointer, lda int32,
		b unsafe.Pointer, ldb int32, beta float32, c unsafe.Pointer, ldc int32)
	calls atomic.Int64
	// small switches the small-product kernels on (SetSmallDot); smallCalls counts the DotGenerals they ran.
	small      atomic.Bool
	smallCalls atomic.Int64
	// noCrew keeps small products off the spinning helpers (SetCrew); crewCalls counts those shared with them.
	noCrew    atomic.Bool
	crewCalls atomic.Int64
	// params caches DotGeneral nodes' axes, bounded (its keys keep their graphs alive).
	paramsOf paramsCache
}

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

// Load opens OpenBLAS once per process ($MCPRL_OPENBLAS, or the usual library names).
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = load() })
	return loaded, loadErr
}

func load() (*Lib, error) {
	names := libraryNames
	if p := os.Getenv(EnvLibrary); p != "" {
		if p == "off" {
			return nil, fmt.Errorf("OpenBLAS disabled by $%s=off", EnvLibrary)
		}
		names = []string{p}
	}
	var errs []error
	for _, name := range names {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := purego.Dlsym(h, "cblas_sgemm"); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		lib := &Lib{Path: name}
		lib.small.Store(true)
		lib.noCrew.Store(os.Getenv(EnvCrew) == "off")
		purego.RegisterLibFunc(&lib.sgemm, h, "cblas_sgemm")
		// One thread per call: this package splits a DotGeneral across cores itself. OpenBLAS's own worker
		// threads keep spinning for a while after each call, and took the cores from the Go kernels that run
		// between matmuls (elementwise ops ran 1.5-1.8x slower behind them).
		if _, err := purego.Dlsym(h, "openblas_set_num_threads"); err == nil {
			var set func(int32)
			purego.RegisterLibFunc(&set, h, "openblas_set_num_threads")
			set(1)
		}
		return lib, nil
	}
	return nil, fmt.Errorf("load OpenBLAS (apt-get install libopenblas0): %w", errors.Join(errs...))
}

// Calls reports how many DotGenerals this library has run for simplego since Install.
func (l *Lib) Calls() int64 { return l.calls.Load() }

// SmallCalls reports how many DotGenerals ran on the small-product kernels (SmallRows) instead.
func (l *Lib) SmallCalls() int64 { return l.smallCalls.Load() }

// SetSmallDot switches the small-product kernels on or off (then OpenBLAS, or simplego below MinWork, runs
// those products), for comparisons in one run; call it between executions. It reports whether the kernels
// can run on this CPU.
func (l *Lib) SetSmallDot(on bool) bool {
	l.small.Store(on)
	return haveAVX512
}

// EnvCrew, set to "off", keeps small products (decoding's) off the helper goroutines that spin between ops (see
// SetCrew); they are shared with them by default where GOMAXPROCS is above 1.
const EnvCrew = "MCPRL_CREW"

// SetCrew switches the sharing of small products (decoding's) with helper goroutines that spin between ops
// on or off, for comparisons in one run; call it between executions. It reports whether there are helpers
// (GOMAXPROCS above 1).
func (l *Lib) SetCrew(on bool) bool {
	l.noCrew.Store(!on)
	return sharedCrew() != nil
}

// CrewCalls reports how many small products were shared with the spinning helpers.
func (l *Lib) CrewCalls() int64 { return l.crewCalls.Load() }

// CrewStats reports the units of the small products shared with the spinning helpers so far, how many of them
// the helpers ran (the rest ran on the callers), and how often the helpers stood down for want of cores.
func (l *Lib) CrewStats() (units, helped, standDowns int64) {
	c := sharedCrew()
	if c == nil {
		return 0, 0, 0
	}
	return c.allUnits.Load(), c.helped.Load(), c.standDowns.Load()
}

// crew returns the helpers small products are shared with, nil when off or when there are none.
func (l *Lib) crew() *crew {
	if l.noCrew.Load() {
		return nil
	}
	return sharedCrew()
}

// Sgemm computes c = a·b (row-major), where a is m x k (k x m when transA) and b is k x n (n x k when transB),
// with leading dimensions lda, ldb and n for c. c's previous contents are overwritten.
func (l *Lib) Sgemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32) {
	l.sgemmLD(transA, transB, m, n, k, a, lda, b, ldb, c, n)
}

// sgemmLD is Sgemm with c's leading dimension ldc (>= n): c may be a block of columns of a wider matrix.
func (l *Lib) sgemmLD(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		for i := range m {
			clear(c[i*ldc : i*ldc+n])
		}
		return
	}
	ta, tb := int32(cblasNoTrans), int32(cblasNoTrans)
	if transA {
		ta = cblasTrans
	}
	if transB {
		tb = cblasTrans
	}
	// Bounds checks that also keep the pointers below valid.
	_ = a[lastIndex(transA, m, k, lda)]
	_ = b[lastIndex(transB, k, n, ldb)]
	_ = c[(m-1)*ldc+n-1]
	l.sgemm(cblasRowMajor, ta, tb, int32(m), int32(n), int32(k), 1, unsafe.Pointer(&a[0]), int32(lda),
		unsafe.Pointer(&b[0]), int32(ldb), 0, unsafe.Pointer(&c[0]), int32(ldc))
}

// lastIndex is the index of the last element a rows x cols operand (stored transposed when trans) reads.
func lastIndex(trans bool, rows, cols, ld int) int {
	if trans {
		rows, cols = cols, rows
	}
	return (rows-1)*ld + cols - 1
}
