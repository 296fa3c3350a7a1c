//go:build !amd64

package kernels

const haveAVX512 = false

func dotNT4AVX512(a *float32, lda int, b *float32, ldb int, nb int, k int, c *float32, ldc int) {
	panic("AVX-512 kernel without amd64")
}

func dotNN4AVX512(a *float32, lda int, b *float32, ldb int, nb int, k int, c *float32, ldc int) {
	panic("AVX-512 kernel without amd64")
}

func dotNT2AVX512(a *float32, lda int, b *float32, ldb int, nb int, k int, c *float32, ldc int) {
	panic("AVX-512 kernel without amd64")
}

func dotNN2AVX512(a *float32, lda int, b *float32, ldb int, nb int, k int, c *float32, ldc int) {
	panic("AVX-512 kernel without amd64")
}
