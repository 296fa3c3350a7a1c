package kernels

import "golang.org/x/sys/cpu"

// haveAVX2 tells whether the AVX2 kernels can run (they use FMA too).
var haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// expAVX2 sets o[i] = e^x[i] for the first len(x) &^ 7 elements, 8 at a time: exp32's algorithm in AVX2 with
// fused multiply-adds (so its roundings differ from exp32's by up to an ulp). o may be x.
//
//go:noescape
func expAVX2(o, x []float32)

// logisticAVX2 sets o[i] = 1/(1+e^-x[i]) for the first len(x) &^ 7 elements, 8 at a time, with the arithmetic
// of logisticRow's scalar loop over expAVX2's exponentials. o may be x.
//
//go:noescape
func logisticAVX2(o, x []float32)

// addAVX2, subAVX2, mulAVX2 and divAVX2 set o[i] = a[i] op b[i] for the first len(o) &^ 7 elements, 8 at a
// time, with IEEE results identical to Go's float32 arithmetic. o may be a or b.
//
//go:noescape
func addAVX2(o, a, b []float32)

//go:noescape
func subAVX2(o, a, b []float32)

//go:noescape
func mulAVX2(o, a, b []float32)

//go:noescape
func divAVX2(o, a, b []float32)

// fillAVX2 sets o[i] = v for the first len(o) &^ 7 elements.
//
//go:noescape
func fillAVX2(o []float32, v float32)

// sumAVX2 returns the sum of the first len(x) &^ 31 elements of x, added in 32 interleaved partial sums.
//
//go:noescape
func sumAVX2(x []float32) float32
