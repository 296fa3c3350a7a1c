package kernels

import "golang.org/x/sys/cpu"

// haveAVX512 tells whether the small-product kernels can run (AVX-512 F and VL, enabled by the OS).
var haveAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

// dotNT4AVX512 sets c[i][4j+q] = Σ_p a[i][p]·b[4j+q][p] for rows i < 4, column blocks j < nb and q < 4, where
// row r of a starts at a + r·lda, of b at b + r·ldb, of c at c + r·ldc (in elements); k is a positive multiple
// of 16.
//
//go:noescape
func dotNT4AVX512(a *float32, lda int, b *float32, ldb int, nb int, k int, c *float32, ldc int)

// dotNN4AVX512 sets c[i][64j+q] = Σ_p a[i][p]·b[p][64j+q] for rows i < 4, column blocks j < nb and q < 64,
// with the same strides; k > 0.
//
//go:noescape
func dotNN4AVX512(a *float32, lda int, b *float32, ldb int, nb int, k int, c *float32, ldc int)

// dotNT2AVX512 is dotNT4AVX512 for two rows of a against blocks of eight rows of b: c[i][8j+q] for i < 2,
// j < nb, q < 8.
//
//go:noescape
func dotNT2AVX512(a *float32, lda int, b *float32, ldb int, nb int, k int, c *float32, ldc int)

// dotNN2AVX512 is dotNN4AVX512 for two rows of a.
//
//go:noescape
func dotNN2AVX512(a *float32, lda int, b *float32, ldb int, nb int, k int, c *float32, ldc int)
