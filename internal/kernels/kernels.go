package kernels

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// simplego (v0.26.0) internals this package uses. The go.mod pins that version; newLayout verifies the fields.

//go:linkname setNodeExecutor github.com/gomlx/gomlx/backends/simplego.setNodeExecutor
func setNodeExecutor(op backends.OpType, priority int, exec executor)

//go:linkname simplegoExecutors github.com/gomlx/gomlx/backends/simplego.nodeExecutors
var simplegoExecutors [backends.OpTypeLast]executor

//go:linkname getBufferForShape github.com/gomlx/gomlx/backends/simplego.(*Backend).getBufferForShape
func getBufferForShape(b *simplego.Backend, s shapes.Shape) *simplego.Buffer

// executor has the signature of simplego's nodeExecutor. An executor may take over an input buffer that
// inputsOwned marks as its own (returning it as the output) and then sets that input to nil.
type executor func(b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error)

// priorityUser is simplego's registerPriority for user overrides.
const priorityUser = 100

// layout holds the offsets of the unexported simplego fields the kernels read.
type layout struct {
	nodeShape, nodeData, bufShape, bufFlat uintptr
}

var lay layout

func newLayout() (layout, error) {
	field := func(t reflect.Type, name string, want reflect.Type) (uintptr, error) {
		f, ok := t.FieldByName(name)
		if !ok || f.Type != want {
			return 0, fmt.Errorf("%s.%s: not a field of type %s", t, name, want)
		}
		return f.Offset, nil
	}
	node, buf := reflect.TypeFor[simplego.Node](), reflect.TypeFor[simplego.Buffer]()
	shape, anyT := reflect.TypeFor[shapes.Shape](), reflect.TypeFor[any]()
	var l layout
	var err error
	if l.nodeShape, err = field(node, "shape", shape); err != nil {
		return l, err
	}
	if l.nodeData, err = field(node, "data", anyT); err != nil {
		return l, err
	}
	if l.bufShape, err = field(buf, "shape", shape); err != nil {
		return l, err
	}
	if l.bufFlat, err = field(buf, "flat", anyT); err != nil {
		return l, err
	}
	return l, nil
}

// nodeShape is the node's output shape.
func nodeShape(n *simplego.Node) *shapes.Shape {
	return (*shapes.Shape)(unsafe.Add(unsafe.Pointer(n), lay.nodeShape))
}

// nodeData is the node's op-specific parameters (reduce axes, a permutation, ...).
func nodeData(n *simplego.Node) any { return *(*any)(unsafe.Add(unsafe.Pointer(n), lay.nodeData)) }

func bufShape(b *simplego.Buffer) *shapes.Shape {
	return (*shapes.Shape)(unsafe.Add(unsafe.Pointer(b), lay.bufShape))
}

func bufFlat(b *simplego.Buffer) any { return *(*any)(unsafe.Add(unsafe.Pointer(b), lay.bufFlat)) }

// float32s returns a float32 buffer's data and dimensions (ok false for other dtypes).
func float32s(b *simplego.Buffer) (data []float32, dims []int, ok bool) {
	if b == nil {
		return nil, nil, false
	}
	s := bufShape(b)
	if s.DType != dtypes.Float32 {
		return nil, nil, false
	}
	data, ok = bufFlat(b).([]float32)
	return data, s.Dimensions, ok && len(data) == s.Size()
}

// newFloat32 returns a backend buffer for a float32 tensor of the given shape, and its data.
func newFloat32(b *simplego.Backend, s shapes.Shape) (*simplego.Buffer, []float32, error) {
	out := getBufferForShape(b, s)
	if out == nil {
		return nil, nil, fmt.Errorf("backend finalized")
	}
	data, _, ok := float32s(out)
	if !ok {
		return nil, nil, fmt.Errorf("buffer for %s is not float32", s)
	}
	return out, data, nil
}

var (
	installOnce sync.Once
	installErr  error
	openblas    *Lib
	openblasErr error
	// simplegos are simplego's own executors for the ops this package replaces, kept to hand back uncovered
	// cases and to switch the kernels off.
	simplegos map[backends.OpType]executor
	goKernels map[backends.OpType]executor
	// handedBack counts the ops a Go kernel handed back to simplego (tests check it stays put for covered ops).
	handedBack atomic.Int64
)

// simplegoExec runs simplego's own executor for op: the kernels' way out for what they do not cover.
func simplegoExec(op backends.OpType, b *simplego.Backend, n *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	handedBack.Add(1)
	return simplegos[op](b, n, inputs, owned)
}

// Install makes every simplego backend in this process run its hot float32 ops on this package's Go kernels,
// and its float32 matmuls on OpenBLAS when the library loads (see OpenBLAS for which). It fails only when the
// linked GoMLX's internals differ from the pinned version's; simplego is then left as it is.
func Install() error {
	installOnce.Do(func() {
		if err := checkVersion(); err != nil {
			installErr = fmt.Errorf("simplego's own kernels stay: %w", err)
			openblasErr = installErr
			return
		}
		l, err := newLayout()
		if err != nil {
			installErr = fmt.Errorf("simplego internals changed, its own kernels stay: %w", err)
			openblasErr = installErr
			return
		}
		lay = l
		simplegos = map[backends.OpType]executor{}
		goKernels = goKernelTable()
		for op := range goKernels {
			simplegos[op] = simplegoExecutors[op]
		}
		simplegos[backends.OpTypeDotGeneral] = simplegoExecutors[backends.OpTypeDotGeneral]
		for op, k := range goKernels {
			setNodeExecutor(op, priorityUser, k)
		}
		openblas, openblasErr = Load()
		if openblasErr == nil {
			setNodeExecutor(backends.OpTypeDotGeneral, priorityUser, openblas.dotGeneral)
		}
	})
	return installErr
}

// OpenBLAS returns the library that runs simplego's float32 matmuls after Install, or why simplego's own
// matmul runs them (OpenBLAS missing, $MCPRL_OPENBLAS=off, or Install failed).
func OpenBLAS() (*Lib, error) {
	if err := Install(); err != nil {
		return nil, err
	}
	return openblas, openblasErr
}

// SetOpenBLAS switches float32 DotGenerals between OpenBLAS (on) and simplego's own matmul (off), for
// comparisons in one run; call it between executions. It reports whether OpenBLAS is installed (with it
// missing, simplego's matmul runs either way).
func SetOpenBLAS(on bool) bool {
	lib, err := OpenBLAS()
	if err != nil {
		return false
	}
	if on {
		setNodeExecutor(backends.OpTypeDotGeneral, priorityUser, lib.dotGeneral)
	} else {
		setNodeExecutor(backends.OpTypeDotGeneral, priorityUser, simplegos[backends.OpTypeDotGeneral])
	}
	return true
}

// SetGoKernels switches the elementwise, reduction and layout ops between this package's Go kernels (on) and
// simplego's own executors (off), for comparisons in one run; call it between executions. It reports whether
// the kernels are installed.
func SetGoKernels(on bool) bool {
	if Install() != nil {
		return false
	}
	for op, k := range goKernels {
		if on {
			setNodeExecutor(op, priorityUser, k)
		} else {
			setNodeExecutor(op, priorityUser, simplegos[op])
		}
	}
	return true
}

// AVX2 reports whether the Go kernels run their AVX2 assembly (the CPU has AVX2 and FMA) rather than scalar Go.
func AVX2() bool { return haveAVX2 }
