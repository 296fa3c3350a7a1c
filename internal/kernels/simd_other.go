//go:build !amd64

package kernels

const haveAVX2 = false

func expAVX2(o, x []float32)          { panic("AVX2 kernel without amd64") }
func logisticAVX2(o, x []float32)     { panic("AVX2 kernel without amd64") }
func addAVX2(o, a, b []float32)       { panic("AVX2 kernel without amd64") }
func subAVX2(o, a, b []float32)       { panic("AVX2 kernel without amd64") }
func mulAVX2(o, a, b []float32)       { panic("AVX2 kernel without amd64") }
func divAVX2(o, a, b []float32)       { panic("AVX2 kernel without amd64") }
func fillAVX2(o []float32, v float32) { panic("AVX2 kernel without amd64") }
func sumAVX2(x []float32) float32     { panic("AVX2 kernel without amd64") }
