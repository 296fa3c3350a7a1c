//go:build !amd64

package kernels

// withoutAVX2 runs f; without amd64 the kernels are scalar Go already.
func withoutAVX2(f func()) { f() }
