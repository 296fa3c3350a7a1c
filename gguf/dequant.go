package gguf

// Dequantization of ggml's block layouts (ggml-quants.c, ggml-common.h), each
// value computed in float32 as gguf-py's quants.py computes it, so that both
// give the same bits:
//
//	Q8_0: blocks of 32: d (f16), qs [32]int8;             x[j] = d * qs[j]
//	Q4_0: blocks of 32: d (f16), qs [16]uint8;            x[j] = d * ((qs[j] & 15) - 8), x[j+16] = d * ((qs[j] >> 4) - 8)
//	Q4_1: blocks of 32: d (f16), m (f16), qs [16]uint8;   x[j] = d * (qs[j] & 15) + m,   x[j+16] = d * (qs[j] >> 4) + m
//	Q5_0: blocks of 32: d (f16), qh uint32, qs [16]uint8; q[j] = qs[j] & 15 | (qh>>j & 1) << 4, q[j+16] = qs[j] >> 4 | (qh>>(j+16) & 1) << 4;
//	      x[j] = d * (q[j] - 16)
//	Q5_1: blocks of 32: d (f16), m (f16), qh uint32, qs [16]uint8; q as Q5_0; x[j] = d * q[j] + m
//	F16, BF16: one value of 2 bytes (BF16 is the upper half of a float32).
//
// The k-quants hold super-blocks of 256 values in sub-blocks of 16 or 32, each
// with its own scale (and min) quantized against the super-block's f16 d (and
// dmin). Value i of a super-block is in sub-block i/16 (Q2_K, Q3_K, Q6_K) or
// i/32 (Q4_K, Q5_K); its bits lie in the bytes at offsets i%32 (or i%64 for
// Q6_K's low bits) of the 128-value half i/128, at the shift its position in
// the half selects:
//
//	Q2_K: scales [16]uint8 (sc & 15, m >> 4), qs [64]uint8, d, dmin (f16); 84 bytes.
//	      q = qs[32*(i/128) + i%32] >> (2*(i%128/32)) & 3; x = d*sc * q - dmin*m
//	Q3_K: hmask [32]uint8, qs [64]uint8, scales [12]uint8, d (f16); 110 bytes.
//	      q = (qs as Q2_K) - 4 unless bit i/32 of hmask[i%32] is set; 16 scales of 6 bits,
//	      sc[k] = (scales[k%8] >> (4*(k/8)) & 15 | (scales[8+k%4] >> (2*(k/4)) & 3) << 4) - 32; x = d*sc * q
//	Q4_K: d, dmin (f16), scales [12]uint8, qs [128]uint8; 144 bytes. 8 scales and mins of 6 bits:
//	      for k < 4, sc[k] = scales[k] & 63, m[k] = scales[k+4] & 63; for k >= 4,
//	      sc[k] = scales[k+4] & 15 | (scales[k-4] >> 6) << 4, m[k] = scales[k+4] >> 4 | (scales[k] >> 6) << 4;
//	      q = qs[32*(i/64) + i%32] >> (4*(i%64/32)) & 15; x = d*sc * q - dmin*m
//	Q5_K: d, dmin (f16), scales [12]uint8 (as Q4_K), qh [32]uint8, qs [128]uint8; 176 bytes.
//	      q = (qs as Q4_K) | (qh[i%32] >> (i/32) & 1) << 4; x = d*sc * q - dmin*m
//	Q6_K: ql [128]uint8, qh [64]uint8, scales [16]int8, d (f16); 210 bytes.
//	      q = (ql[64*(i/128) + i%64] >> (4*(i%128/64)) & 15 | (qh[32*(i/128) + i%32] >> (2*(i%128/32)) & 3) << 4) - 32;
//	      x = d*sc * q
//
// Each product is rounded to float32 before the next operation, as numpy
// computes them (no fused multiply-add).

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

type dequantizer struct {
	t     TensorType
	block func(dst []float32, src []byte) // one block
}

var dequantizers = []dequantizer{
	{F32, func(dst []float32, src []byte) { dst[0] = math.Float32frombits(binary.LittleEndian.Uint32(src)) }},
	{F16, func(dst []float32, src []byte) { dst[0] = f16(src) }},
	{BF16, func(dst []float32, src []byte) {
		dst[0] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src)) << 16)
	}},
	{Q8_0, dequantQ8_0},
	{Q4_0, dequantQ4_0},
	{Q4_1, dequantQ4_1},
	{Q5_0, dequantQ5_0},
	{Q5_1, dequantQ5_1},
	{Q2_K, dequantQ2_K},
	{Q3_K, dequantQ3_K},
	{Q4_K, dequantQ4_K},
	{Q5_K, dequantQ5_K},
	{Q6_K, dequantQ6_K},
}

// CanDequantize reports whether Dequantize supports t.
func CanDequantize(t TensorType) bool {
	for _, d := range dequantizers {
		if d.t == t {
			return true
		}
	}
	return false
}

// DequantizableTypes returns the types Dequantize supports: F32, F16, BF16,
// then the block types from the simplest.
func DequantizableTypes() []TensorType {
	types := make([]TensorType, len(dequantizers))
	for i, d := range dequantizers {
		types[i] = d.t
	}
	return types
}

// Dequantize decodes src, data of type t, into dst, which must hold exactly
// the values src encodes.
func Dequantize(dst []float32, src []byte, t TensorType) error {
	var block func([]float32, []byte)
	for _, d := range dequantizers {
		if d.t == t {
			block = d.block
		}
	}
	if block == nil {
		return fmt.Errorf("cannot dequantize %s (supported: %s)", t, supportedList())
	}
	values, size, _ := t.BlockSize()
	if len(dst)%values != 0 || len(src) != len(dst)/values*size {
		return fmt.Errorf("%s: %d bytes do not encode %d values", t, len(src), len(dst))
	}
	for i, j := 0, 0; i < len(dst); i, j = i+values, j+size {
		block(dst[i:i+values], src[j:j+size])
	}
	return nil
}

func f16(b []byte) float32 { return float16.Frombits(binary.LittleEndian.Uint16(b)).Float32() }

func dequantQ8_0(dst []float32, src []byte) {
	d := f16(src)
	for j, q := range src[2:34] {
		dst[j] = d * float32(int8(q))
	}
}

func dequantQ4_0(dst []float32, src []byte) {
	d := f16(src)
	for j, q := range src[2:18] {
		dst[j] = d * float32(int(q&15)-8)
		dst[j+16] = d * float32(int(q>>4)-8)
	}
}

func dequantQ4_1(dst []float32, src []byte) {
	d, m := f16(src), f16(src[2:])
	for j, q := range src[4:20] {
		// The conversion rounds the product before the add: no fused multiply-add, as numpy computes it.
		dst[j] = float32(d*float32(q&15)) + m
		dst[j+16] = float32(d*float32(q>>4)) + m
	}
}

// q5 is the 5-bit values of a Q5_0 or Q5_1 block: the nibbles of qs, their fifth bits in qh.
func q5(q *[32]byte, qs []byte, qh uint32) {
	for j, b := range qs[:16] {
		q[j] = b&15 | byte(qh>>j&1)<<4
		q[j+16] = b>>4 | byte(qh>>(j+16)&1)<<4
	}
}

func dequantQ5_0(dst []float32, src []byte) {
	var q [32]byte
	q5(&q, src[6:22], binary.LittleEndian.Uint32(src[2:]))
	d := f16(src)
	for j, v := range q {
		dst[j] = d * float32(int(v)-16)
	}
}

func dequantQ5_1(dst []float32, src []byte) {
	var q [32]byte
	q5(&q, src[8:24], binary.LittleEndian.Uint32(src[4:]))
	d, m := f16(src), f16(src[2:])
	for j, v := range q {
		dst[j] = float32(d*float32(v)) + m
	}
}

func dequantQ2_K(dst []float32, src []byte) {
	scales, qs := src[:16], src[16:80]
	d, dmin := f16(src[80:]), f16(src[82:])
	for k, sc := range scales { // sub-block k: values 16k..16k+15
		dl, ml := d*float32(sc&15), dmin*float32(sc>>4)
		q, shift, out := qs[32*(k/8)+16*(k%2):], 2*(k%8/2), dst[16*k:16*k+16]
		for l := range out {
			out[l] = float32(dl*float32(q[l]>>shift&3)) - ml
		}
	}
}

func dequantQ3_K(dst []float32, src []byte) {
	hmask, qs, scales := src[:32], src[32:96], src[96:108]
	d := f16(src[108:])
	for k := range 16 { // sub-block k: values 16k..16k+15
		sc := int(scales[k%8]>>(4*(k/8))&15|(scales[8+k%4]>>(2*(k/4))&3)<<4) - 32
		dl := d * float32(sc)
		q, shift, h, bit, out := qs[32*(k/8)+16*(k%2):], 2*(k%8/2), hmask[16*(k%2):], k/2, dst[16*k:16*k+16]
		for l := range out {
			v := int(q[l] >> shift & 3)
			if h[l]>>bit&1 == 0 {
				v -= 4
			}
			out[l] = dl * float32(v)
		}
	}
}

// scaleMinK4 is the 6-bit scale and min of sub-block k of a Q4_K or Q5_K super-block.
func scaleMinK4(scales []byte, k int) (sc, m float32) {
	if k < 4 {
		return float32(scales[k] & 63), float32(scales[k+4] & 63)
	}
	return float32(scales[k+4]&15 | scales[k-4]>>6<<4), float32(scales[k+4]>>4 | scales[k]>>6<<4)
}

func dequantQ4_K(dst []float32, src []byte) {
	d, dmin, scales, qs := f16(src), f16(src[2:]), src[4:16], src[16:144]
	for k := range 8 {
		sc, m := scaleMinK4(scales, k)
		dl, ml := d*sc, dmin*m
		q, shift, out := qs[32*(k/2):32*(k/2)+32], 4*(k%2), dst[32*k:32*k+32]
		for j, b := range q {
			out[j] = float32(dl*float32(b>>shift&15)) - ml
		}
	}
}

func dequantQ5_K(dst []float32, src []byte) {
	d, dmin, scales, qh, qs := f16(src), f16(src[2:]), src[4:16], src[16:48], src[48:176]
	for k := range 8 {
		sc, m := scaleMinK4(scales, k)
		dl, ml := d*sc, dmin*m
		q, shift, out := qs[32*(k/2):32*(k/2)+32], 4*(k%2), dst[32*k:32*k+32]
		for j, b := range q {
			out[j] = float32(dl*float32(b>>shift&15|qh[j]>>k&1<<4)) - ml
		}
	}
}

func dequantQ6_K(dst []float32, src []byte) {
	ql, qh, scales := src[:128], src[128:192], src[192:208]
	d := f16(src[208:])
	for k, sc := range scales { // sub-block k: values 16k..16k+15
		dl := d * float32(int8(sc))
		half, r := k/8, 16*(k%8) // r: the sub-block's first value within its half
		lo, hi, out := ql[64*half+r%64:], qh[32*half+r%32:], dst[16*k:16*k+16]
		loShift, hiShift := 4*(r/64), 2*(r/32)
		for l := range out {
			q := int(lo[l]>>loShift&15|(hi[l]>>hiShift&3)<<4) - 32
			out[l] = dl * float32(q)
		}
	}
}
