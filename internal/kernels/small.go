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

// smallAlign is the column granularity of a split across cores: whole blocks of 8 columns (b as [n, k]; the
// two-row kernel's blocks, two of the four-row kernel's) or 64 ([k, n]).
func smallAlign(bCrossFirst bool) int {
	if bCrossFirst {
		return 8
	}
	return 64
}

// smallDot sets columns n0..n1-1 of c [m, n] to a [m, k] times b ([n, k] when bCrossFirst: c = a·bᵀ, else
// [k, n]: c = a·b) on the AVX-512 kernels: four rows at a time, then two, and a last single row as two through
// a zero-padded copy in *scratch (grown as needed).
func smallDot(m, n, k int, a, b []float32, bCrossFirst bool, c []float32, n0, n1 int, scratch *[]float32) {
	i := 0
	for ; i+4 <= m; i += 4 {
		smallRows(4, a[i*k:(i+4)*k], k, b, n, bCrossFirst, c[i*n+n0:], n, n0, n1)
	}
	if i+2 <= m {
		smallRows(2, a[i*k:(i+2)*k], k, b, n, bCrossFirst, c[i*n+n0:], n, n0, n1)
		i += 2
	}
	if i < m {
		w := n1 - n0
		if cap(*scratch) < 2*k+2*w {
			*scratch = make([]float32, 2*k+2*w)
		}
		pa, pc := (*scratch)[:2*k], (*scratch)[2*k:2*k+2*w]
		clear(pa[copy(pa, a[i*k:(i+1)*k]):])
		smallRows(2, pa, k, b, n, bCrossFirst, pc, w, n0, n1)
		copy(c[i*n+n0:i*n+n1], pc[:w])
	}
}

// smallRows sets columns n0..n1-1 of rows (4 or 2) rows of a product: a holds the rows (stride k), c the
// output from column n0 on (rows ldc apart), b is [n, k] or [k, n] as in smallDot. Whole blocks run on a
// kernel, the columns after the last block in Go.
func smallRows(rows int, a []float32, k int, b []float32, n int, bCrossFirst bool, c []float32, ldc, n0, n1 int) {
	align := 64
	if bCrossFirst {
		align = 16 / rows // blocks of 4 columns for four rows, 8 for two: sixteen accumulators either way
	}
	nb := (n1 - n0) / align
	if cols := nb * align; cols > 0 {
		_ = a[rows*k-1]
		_ = c[(rows-1)*ldc+cols-1]
		switch {
		case bCrossFirst && rows == 4:
			_ = b[(n0+cols)*k-1]
			dotNT4AVX512(&a[0], k, &b[n0*k], k, nb, k, &c[0], ldc)
		case bCrossFirst:
			_ = b[(n0+cols)*k-1]
			dotNT2AVX512(&a[0], k, &b[n0*k], k, nb, k, &c[0], ldc)
		case rows == 4:
			_ = b[(k-1)*n+n0+cols-1]
			dotNN4AVX512(&a[0], k, &b[n0], n, nb, k, &c[0], ldc)
		default:
			_ = b[(k-1)*n+n0+cols-1]
			dotNN2AVX512(&a[0], k, &b[n0], n, nb, k, &c[0], ldc)
		}
	}
	for j := n0 + nb*align; j < n1; j++ {
		for r := range rows {
			var sum float32
			ar := a[r*k : (r+1)*k]
			if bCrossFirst {
				bj := b[j*k : (j+1)*k]
				for p, v := range ar {
					sum += v * bj[p]
				}
			} else {
				for p, v := range ar {
					sum += v * b[p*n+j]
				}
			}
			c[r*ldc+j-n0] = sum
		}
	}
}
