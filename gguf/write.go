package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// WriteTensor is a tensor for Write: its name, ggml type, shape (outermost
// axis first, as TensorInfo.Shape gives it) and a function that returns its
// data encoded in Type's layout. Data is called once, while Write streams the
// data section, so that only one tensor need be in memory at a time.
type WriteTensor struct {
	Name  string
	Type  TensorType
	Shape []int
	Data  func() ([]byte, error)
}

// dims is ggml's dimension order: the fastest-varying axis first.
func (t *WriteTensor) dims() []uint64 {
	d := make([]uint64, len(t.Shape))
	for i, s := range t.Shape {
		d[len(d)-1-i] = uint64(s)
	}
	return d
}

// Write writes a GGUF version 3 file: the header, metadata in the given
// order, the tensor infos, and each tensor's data aligned to the alignment
// (DefaultAlignment, or the value of a general.alignment entry in metadata).
// The layout is gguf-py's GGUFWriter's, byte for byte, for the same metadata
// and tensors in the same order.
//
// Metadata values are the Go types Reader gives: uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, uint64, int64, float64, a slice of
// one of these, or []any of slices for an array of arrays. Write fails,
// naming the key or tensor, on any other type, a duplicate key or tensor
// name, or a shape whose rows are not whole blocks of the tensor's type,
// before it writes anything; and on a tensor whose Data fails or is of the
// wrong size, leaving w with a partial file.
func Write(w io.Writer, metadata []KV, tensors []WriteTensor) error {
	alignment := uint64(DefaultAlignment)
	keys := make(map[string]bool, len(metadata))
	for _, kv := range metadata {
		if keys[kv.Key] {
			return fmt.Errorf("gguf: metadata key %q appears twice", kv.Key)
		}
		keys[kv.Key] = true
		if kv.Key == KeyAlignment {
			a, ok := toUint(kv.Value)
			if !ok || a == 0 || a&(a-1) != 0 {
				return fmt.Errorf("gguf: metadata %s = %v is not a power of two", KeyAlignment, kv.Value)
			}
			alignment = a
		}
	}
	infos := make([]TensorInfo, len(tensors))
	sizes := make([]uint64, len(tensors))
	names := make(map[string]bool, len(tensors))
	var offset uint64
	for i := range tensors {
		t := &tensors[i]
		if names[t.Name] {
			return fmt.Errorf("gguf: tensor %q appears twice", t.Name)
		}
		names[t.Name] = true
		if len(t.Shape) == 0 || len(t.Shape) > maxDims {
			return fmt.Errorf("gguf: tensor %q has %d dimensions", t.Name, len(t.Shape))
		}
		infos[i] = TensorInfo{Name: t.Name, Dims: t.dims(), Type: t.Type, Offset: offset}
		n, err := infos[i].NumBytes()
		if err != nil {
			return fmt.Errorf("gguf: %w", err)
		}
		sizes[i] = n
		offset = align(offset+n, alignment)
	}

	check := &encoder{w: io.Discard} // every value is checked before anything is written
	for _, kv := range metadata {
		if err := check.value(kv.Value, 0); err != nil {
			return fmt.Errorf("gguf: metadata %q: %w", kv.Key, err)
		}
	}

	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	e.bytes([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(metadata)))
	for _, kv := range metadata {
		e.str(kv.Key)
		if err := e.value(kv.Value, 0); err != nil {
			return fmt.Errorf("gguf: metadata %q: %w", kv.Key, err)
		}
	}
	for _, t := range infos {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
	}
	e.pad(alignment)
	for i := range tensors {
		data, err := tensors[i].Data()
		if err != nil {
			return fmt.Errorf("gguf: tensor %q: %w", tensors[i].Name, err)
		}
		if uint64(len(data)) != sizes[i] {
			return fmt.Errorf("gguf: tensor %q (%s, shape %v): %d bytes of data, want %d",
				tensors[i].Name, tensors[i].Type, tensors[i].Shape, len(data), sizes[i])
		}
		e.bytes(data)
		e.pad(alignment)
	}
	if e.err != nil {
		return fmt.Errorf("gguf: write: %w", e.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	return nil
}

// encoder writes little-endian values, keeping the first error and the position.
type encoder struct {
	w   io.Writer
	pos uint64
	err error
	buf [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	_, e.err = e.w.Write(b)
	e.pos += uint64(len(b))
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.bytes(e.buf[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.bytes(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.bytes([]byte(s))
}

func (e *encoder) pad(alignment uint64) {
	if n := align(e.pos, alignment) - e.pos; n > 0 {
		e.bytes(make([]byte, n))
	}
}

// value writes v's type tag and v.
func (e *encoder) value(v any, depth int) error {
	t, ok := valueType(v)
	if !ok {
		return fmt.Errorf("value of type %T cannot be written", v)
	}
	e.u32(uint32(t))
	if t == TypeArray {
		return e.array(v, depth)
	}
	e.scalar(v)
	return nil
}

// array writes an array's element type, length and elements; an element of
// an array of arrays is itself written this way.
func (e *encoder) array(v any, depth int) error {
	if depth > 4 {
		return fmt.Errorf("arrays nested too deep")
	}
	switch a := v.(type) {
	case []any:
		e.u32(uint32(TypeArray))
		e.u64(uint64(len(a)))
		for i, x := range a {
			if t, ok := valueType(x); !ok || t != TypeArray {
				return fmt.Errorf("element %d of an array of arrays is %T", i, x)
			}
			if err := e.array(x, depth+1); err != nil {
				return err
			}
		}
	case []string:
		writeSlice(e, TypeString, a)
	case []uint8:
		writeSlice(e, TypeUint8, a)
	case []int8:
		writeSlice(e, TypeInt8, a)
	case []uint16:
		writeSlice(e, TypeUint16, a)
	case []int16:
		writeSlice(e, TypeInt16, a)
	case []uint32:
		writeSlice(e, TypeUint32, a)
	case []int32:
		writeSlice(e, TypeInt32, a)
	case []float32:
		writeSlice(e, TypeFloat32, a)
	case []bool:
		writeSlice(e, TypeBool, a)
	case []uint64:
		writeSlice(e, TypeUint64, a)
	case []int64:
		writeSlice(e, TypeInt64, a)
	case []float64:
		writeSlice(e, TypeFloat64, a)
	default:
		return fmt.Errorf("array of type %T cannot be written", v)
	}
	return nil
}

func writeSlice[T any](e *encoder, et ValueType, a []T) {
	e.u32(uint32(et))
	e.u64(uint64(len(a)))
	for _, x := range a {
		e.scalar(x)
	}
}

// scalar writes a fixed-size value or a string, without its type tag.
func (e *encoder) scalar(v any) {
	switch x := v.(type) {
	case uint8:
		e.bytes([]byte{x})
	case int8:
		e.bytes([]byte{byte(x)})
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		e.bytes([]byte{b})
	case uint16:
		binary.LittleEndian.PutUint16(e.buf[:2], x)
		e.bytes(e.buf[:2])
	case int16:
		binary.LittleEndian.PutUint16(e.buf[:2], uint16(x))
		e.bytes(e.buf[:2])
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	}
}

// valueType is the GGUF type of a Go value that Write accepts.
func valueType(v any) (ValueType, bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, true
	case int8:
		return TypeInt8, true
	case uint16:
		return TypeUint16, true
	case int16:
		return TypeInt16, true
	case uint32:
		return TypeUint32, true
	case int32:
		return TypeInt32, true
	case float32:
		return TypeFloat32, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	case uint64:
		return TypeUint64, true
	case int64:
		return TypeInt64, true
	case float64:
		return TypeFloat64, true
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool, []string, []uint64, []int64,
		[]float64, []any:
		return TypeArray, true
	}
	return 0, false
}
