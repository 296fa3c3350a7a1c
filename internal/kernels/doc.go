// Package kernels runs the hot float32 ops of GoMLX's pure-Go simplego backend on faster kernels: matrix
// multiplications on the machine's OpenBLAS (cblas_sgemm, loaded at run time with dlopen, so that a binary built
// without it still runs on simplego's own matmul when the library is missing), and the elementwise, broadcasting,
// reduction and transposition ops that dominate a transformer's training step on Go loops that walk whole rows
// and split large tensors across cores, where simplego steps an index iterator per element.
//
// simplego v0.26 has no hook for external kernels: Install replaces its executors through a linkname to the
// backend's executor table, and reads nodes and buffers through field offsets taken with reflection. Everything
// it reads is checked once against the pinned GoMLX version's layout; on any mismatch Install reports an error
// and leaves simplego unchanged. Each kernel hands an op it does not cover (another dtype, an unusual layout)
// back to simplego's own executor.
//
// InstallDotGradient replaces GoMLX's DotGeneral gradient with one made of two DotGenerals (GoMLX's materializes
// a broadcast product). Both patches install only on the pinned GoMLX (PinnedGoMLX, checked against the
// binary's build info) and otherwise leave GoMLX's own code running; DotGradientEngine and the model package's engine report say which runs.
//
// The executor table is per process, as simplego's is: Install and the Set functions affect every simplego
// backend in the process.
package kernels
