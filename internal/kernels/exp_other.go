//go:build !amd64

package kernels

const haveExpAVX2 = false

func expAVX2(o, x []float32) { panic("expAVX2 without amd64") }
