package kernels

// withoutAVX2 runs f with the AVX2 kernels switched off (scalar Go everywhere), for tests of the fallback.
func withoutAVX2(f func()) {
	defer func(v bool) { haveAVX2 = v }(haveAVX2)
	haveAVX2 = false
	f()
}
