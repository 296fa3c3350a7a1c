package eval

import "fmt"

// PassAtK is the unbiased estimator of pass@k from n samples of which c
// passed (Chen et al., 2021): 1 - C(n-c, k) / C(n, k), the probability that
// at least one of k samples drawn without replacement from the n passes.
// It is computed as the product 1 - prod_{i=n-c+1}^{n} (1 - k/i), which
// never forms a binomial coefficient and so neither overflows nor loses
// precision for large n.
func PassAtK(n, c, k int) (float64, error) {
	if n < 1 || k < 1 || k > n || c < 0 || c > n {
		return 0, fmt.Errorf("pass@k: need 1 <= k <= n and 0 <= c <= n, got n=%d c=%d k=%d", n, c, k)
	}
	if n-c < k {
		return 1, nil
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p, nil
}
