package gguf

// Dequantization of ggml's block layouts (ggml-quants.c, ggml-common.h), each
// value computed in float32 as gguf-py's quants.py computes it, so that both
// give the same bits:
//
//	Q8_0: blocks of 32: d (f16), qs [32]int8;             x[j] = d * qs[j]
//	Q4_0: blocks of 32: d (f16), qs [16]uint8;            x[j] = d * ((qs[j] & 15) - 8), x[j+16] = d * ((qs[j] >> 4) - 8)
//	Q4_1: blocks of 32: d (f16), m (f16), qs [16]uint8;   x[j] = d * (qs[j] & 15) + m,   x[j+16] = d * (qs[j] >> 4) + m
//	F16, BF16: one value of 2 bytes (BF16 is the upper half of a float32).

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
