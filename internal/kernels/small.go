package kernels

// SmallRows is the most rows (lhs cross size) a float32 DotGeneral may have to run on the small-product
// kernels instead of OpenBLAS, on CPUs with AVX-512: a decoding step multiplies one row per sequence by each
// weight matrix, a shape where OpenBLAS 0.3.21 reaches a third of what it does on a training step's.
const SmallRows = 16

// smallOK reports whether the small-product kernels take a product of m rows (stored [m, k]: aCrossFirst) by
// b ([n, k] when bCrossFirst, else [k, n]).
func smallOK(m, k int, aCrossFirst, bCrossFirst bool) bool {
	if !haveAVX512 || !aCrossFirst || m > SmallRows || m == 0 || k == 0 {
		return false
	}
	return !bCrossFirst || k%16 == 0
}

// smallAlign is the column granularity of the kernels: blocks of 4 columns (b as [n, k]) or 64 ([k, n]).
func smallAlign(bCrossFirst bool) int {
	if bCrossFirst {
		return 4
	}
	return 64
}

// smallDot sets columns n0..n1-1 of c [m, n] to a [m, k] times b ([n, k] when bCrossFirst: c = a·bᵀ, else
// [k, n]: c = a·b), four rows at a time on the AVX-512 kernels; n0 is a multiple of smallAlign. Rows beyond the
// last multiple of four are computed through a zero-padded copy in *scratch (grown as needed), columns beyond
// the last block in Go.
func smallDot(m, n, k int, a, b []float32, bCrossFirst bool, c []float32, n0, n1 int, scratch *[]float32) {
	align := smallAlign(bCrossFirst)
	nb := (n1 - n0) / align
	full := m &^ 3
	for i := 0; i < full; i += 4 {
		smallBlock(a[i*k:(i+4)*k], k, b, n, bCrossFirst, c[i*n+n0:], n, n0, nb)
	}
	if rest := m - full; rest > 0 {
		w := n1 - n0
		if cap(*scratch) < 4*k+4*w {
			*scratch = make([]float32, 4*k+4*w)
		}
		pa, pc := (*scratch)[:4*k], (*scratch)[4*k:4*k+4*w]
		clear(pa[copy(pa, a[full*k:m*k]):])
		smallBlock(pa, k, b, n, bCrossFirst, pc, w, n0, nb)
		for i := range rest {
			copy(c[(full+i)*n+n0:(full+i)*n+n0+nb*align], pc[i*w:i*w+nb*align])
		}
	}
	// Columns after the last whole block.
	for j := n0 + nb*align; j < n1; j++ {
		for i := range m {
			var s float32
			ai := a[i*k : (i+1)*k]
			if bCrossFirst {
				bj := b[j*k : (j+1)*k]
				for p, v := range ai {
					s += v * bj[p]
				}
			} else {
				for p, v := range ai {
					s += v * b[p*n+j]
				}
			}
			c[i*n+j] = s
		}
	}
}

// smallBlock runs one kernel call: four rows of a (stride k) against nb column blocks of b from column n0,
// into c (its first column is column n0; rows ldc apart). n is b's column count when b is [k, n].
func smallBlock(a []float32, k int, b []float32, n int, bCrossFirst bool, c []float32, ldc, n0, nb int) {
	if nb == 0 {
		return
	}
	if bCrossFirst {
		cols := 4 * nb
		_ = a[4*k-1]
		_ = b[(n0+cols)*k-1]
		_ = c[3*ldc+cols-1]
		dotNT4AVX512(&a[0], k, &b[n0*k], k, nb, k, &c[0], ldc)
		return
	}
	cols := 64 * nb
	_ = a[4*k-1]
	_ = b[(k-1)*n+n0+cols-1]
	_ = c[3*ldc+cols-1]
	dotNN4AVX512(&a[0], k, &b[n0], n, nb, k, &c[0], ldc)
}
