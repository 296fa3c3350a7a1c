package kernels

import "golang.org/x/sys/cpu"

// haveExpAVX2 tells whether expAVX2 can run: AVX2 and FMA.
var haveExpAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// expAVX2 sets o[i] = e^x[i] for the first len(x) &^ 7 elements, 8 at a time: exp32's algorithm in AVX2 with
// fused multiply-adds (so its roundings differ from exp32's by up to an ulp). o may be x.
//
//go:noescape
func expAVX2(o, x []float32)
