package gguf

// Quantization into ggml's layouts, each value computed in float32 as gguf-py's
// quants.py computes it (and llama.cpp's quantize_row_*_ref), so that both give
// the same bytes:
//
//	F16:  x rounded to the nearest float16, ties to even (numpy's astype(float16))
//	Q8_0: per block of 32: d = max|x| / 127, q[j] = round-half-away-from-zero(x[j] * (1/d)), 0 when d is 0;
//	      stored as d (float16) then q ([32]int8)

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// CanQuantize reports whether Quantize supports t.
func CanQuantize(t TensorType) bool { return t == F32 || t == F16 || t == Q8_0 }

// Quantize encodes values as type t (F32, F16 or Q8_0). For a block type the
// number of values must be a whole number of blocks; each row of a tensor
// must be, for its rows to be quantized independently.
func Quantize(t TensorType, values []float32) ([]byte, error) {
	switch t {
	case F32:
		out := make([]byte, 4*len(values))
		for i, v := range values {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return out, nil
	case F16:
		out := make([]byte, 2*len(values))
		for i, v := range values {
			binary.LittleEndian.PutUint16(out[2*i:], float16.Fromfloat32(v).Bits())
		}
		return out, nil
	case Q8_0:
		if len(values)%32 != 0 {
			return nil, fmt.Errorf("quantize %s: %d values are not a whole number of blocks of 32", t, len(values))
		}
		out := make([]byte, len(values)/32*34)
		for b := 0; b < len(values)/32; b++ {
			quantQ8_0(out[34*b:34*b+34], values[32*b:32*b+32])
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot quantize to %s (supported: F32, F16, Q8_0)", t)
}

func quantQ8_0(dst []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst, float16.Fromfloat32(d).Bits())
	for j, v := range x {
		p := float32(v * id) // rounded to float32 before rounding to an integer, as numpy computes it
		dst[2+j] = byte(int8(math.Round(float64(p))))
	}
}
