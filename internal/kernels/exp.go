package kernels

import "math"

// exp32 is e^x in float32 arithmetic (Cephes' expf: Cody-Waite reduction by ln 2 and a degree-6 polynomial),
// within 2 ulp of the correctly rounded result; several times faster than math.Exp's float64.
func exp32(x float32) float32 {
	const (
		maxLog = 88.72283905206835   // ln(MaxFloat32)
		minLog = -103.27892990343185 // ln(2^-149), the smallest subnormal
		log2e  = 1.44269504088896341
		c1     = 0.693359375 // ln 2 = c1 - c2, c1 exact in few bits
		c2     = -2.12194440e-4
	)
	switch {
	case x != x:
		return x
	case x > maxLog:
		return float32(math.Inf(1))
	case x < minLog:
		return 0
	}
	t := x*log2e + 0.5
	n := int32(t)
	if float32(n) > t {
		n-- // floor
	}
	fn := float32(n)
	x = x - fn*c1 - fn*c2
	z := x * x
	p := ((((1.9875691500e-4*x+1.3981999507e-3)*x+8.3334519073e-3)*x+4.1665795894e-2)*x+1.6666665459e-1)*x + 5.0000001201e-1
	p = p*z + x + 1
	switch {
	case n > 127:
		return p * pow2(127) * pow2(n-127)
	case n < -126:
		return p * pow2(n+64) * pow2(-64)
	}
	return p * pow2(n)
}

// pow2 is 2^n for -126 <= n <= 127.
func pow2(n int32) float32 { return math.Float32frombits(uint32(n+127) << 23) }
