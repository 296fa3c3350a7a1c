package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// KV is one metadata entry. Value holds, by the entry's type: uint8, int8,
// uint16, int16, uint32, int32, float32, bool, string, uint64, int64 or
// float64; an array is a slice of one of those ([]string, []int32, ...), or
// []any for an array of arrays.
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes one tensor of the file.
type TensorInfo struct {
	Name string
	// Dims are ggml's dimensions, the fastest-varying first (ne0, ne1, ...):
	// a [out, in] weight matrix has Dims {in, out}.
	Dims []uint64
	Type TensorType
	// Offset of the tensor's data from the start of the data section.
	Offset uint64
}

// Shape is the tensor's shape outermost axis first, as numpy, PyTorch and
// safetensors write it: Dims reversed.
func (t *TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = int(d)
	}
	return s
}

// NumElements is the product of Dims.
func (t *TensorInfo) NumElements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// NumBytes is the size of the tensor's data, or an error for an unknown type
// or a row that is not a whole number of the type's blocks.
func (t *TensorInfo) NumBytes() (uint64, error) {
	block, size, ok := t.Type.BlockSize()
	if !ok {
		return 0, fmt.Errorf("tensor %q: unknown ggml type %s", t.Name, t.Type)
	}
	if len(t.Dims) > 0 && t.Dims[0]%uint64(block) != 0 {
		return 0, fmt.Errorf("tensor %q: row of %d values is not a whole number of %s blocks of %d", t.Name, t.Dims[0], t.Type, block)
	}
	return t.NumElements() / uint64(block) * uint64(size), nil
}

// File is a GGUF file's header: its version, metadata in file order, tensor
// infos in file order, and where the tensor data starts.
type File struct {
	Version   uint32
	Metadata  []KV
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is the byte offset of the data section in the file.
	DataOffset int64
}

// Reader is an open GGUF file.
type Reader struct {
	File
	path   string
	f      *os.File
	byName map[string]int
	meta   map[string]int
}

// maxDims bounds a tensor's number of dimensions (ggml has 4).
const maxDims = 8

// Open reads path's header, metadata and tensor infos. It fails on a file that
// is not GGUF (version 2 or 3), on metadata or tensor infos that run past the
// end of the file, and on tensors whose data does not lie inside the file (a
// truncated file), before any tensor data is read.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	r := &Reader{path: path, f: f}
	if err := r.readHeader(st.Size()); err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	return r, nil
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// Path is the file's path.
func (r *Reader) Path() string { return r.path }

// decoder reads little-endian values and refuses any length that would run
// past the end of the file, so a corrupt length never turns into a huge allocation.
type decoder struct {
	r    *bufio.Reader
	pos  int64 // bytes read
	size int64 // file size
	buf  [8]byte
}

var errTruncated = errors.New("file ends inside the header (truncated?)")

func (d *decoder) read(n int) ([]byte, error) {
	if _, err := io.ReadFull(d.r, d.buf[:n]); err != nil {
		return nil, errTruncated
	}
	d.pos += int64(n)
	return d.buf[:n], nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a uint64 count of items of at least minSize bytes each and checks they fit in the file.
func (d *decoder) count(minSize int, what string) (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if left := uint64(d.size - d.pos); minSize > 0 && n > left/uint64(minSize) {
		return 0, fmt.Errorf("%s: %d items of at least %d bytes do not fit in the %d bytes left (truncated or corrupt)", what, n, minSize, left)
	}
	return int(n), nil
}

func (d *decoder) str(what string) (string, error) {
	n, err := d.count(1, what)
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return "", errTruncated
	}
	d.pos += int64(n)
	return string(b), nil
}

func (r *Reader) readHeader(size int64) error {
	d := &decoder{r: bufio.NewReaderSize(r.f, 1<<16), size: size}
	magic, err := d.read(4)
	if err != nil {
		return fmt.Errorf("not a GGUF file: %d bytes", size)
	}
	if string(magic) != Magic {
		return fmt.Errorf("not a GGUF file: starts with %q, want %q", magic, Magic)
	}
	if r.Version, err = d.u32(); err != nil {
		return err
	}
	if r.Version != 2 && r.Version != 3 {
		return fmt.Errorf("GGUF version %d not supported (2 or 3)", r.Version)
	}
	// A tensor info takes at least 8 (name length) + 4 (dims) + 4 (type) + 8 (offset) bytes,
	// a metadata entry 8 (key length) + 4 (type) + 1.
	nTensors, err := d.count(24, "tensor count")
	if err != nil {
		return err
	}
	nKV, err := d.count(13, "metadata count")
	if err != nil {
		return err
	}
	r.Metadata = make([]KV, 0, nKV)
	r.meta = make(map[string]int, nKV)
	for i := range nKV {
		key, err := d.str(fmt.Sprintf("metadata entry %d: key", i))
		if err != nil {
			return err
		}
		t, err := d.u32()
		if err != nil {
			return err
		}
		v, err := d.value(ValueType(t), key, 0)
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		if _, dup := r.meta[key]; dup {
			return fmt.Errorf("metadata key %q appears twice", key)
		}
		r.meta[key] = len(r.Metadata)
		r.Metadata = append(r.Metadata, KV{Key: key, Value: v})
	}
	r.Alignment = DefaultAlignment
	if v, ok := r.Value(KeyAlignment); ok {
		a, ok := toUint(v)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("metadata %s = %v is not a power of two", KeyAlignment, v)
		}
		r.Alignment = a
	}

	r.Tensors = make([]TensorInfo, 0, nTensors)
	r.byName = make(map[string]int, nTensors)
	for i := range nTensors {
		name, err := d.str(fmt.Sprintf("tensor %d: name", i))
		if err != nil {
			return err
		}
		nd, err := d.u32()
		if err != nil {
			return err
		}
		if nd > maxDims {
			return fmt.Errorf("tensor %q: %d dimensions", name, nd)
		}
		t := TensorInfo{Name: name, Dims: make([]uint64, nd)}
		for j := range t.Dims {
			if t.Dims[j], err = d.u64(); err != nil {
				return err
			}
		}
		ty, err := d.u32()
		if err != nil {
			return err
		}
		t.Type = TensorType(ty)
		if t.Offset, err = d.u64(); err != nil {
			return err
		}
		if _, dup := r.byName[name]; dup {
			return fmt.Errorf("tensor %q appears twice", name)
		}
		r.byName[name] = len(r.Tensors)
		r.Tensors = append(r.Tensors, t)
	}
	r.DataOffset = int64(align(uint64(d.pos), r.Alignment))

	// Every tensor must lie inside the file: checked here, before any tensor is read or allocated.
	dataSize := uint64(max(size-r.DataOffset, 0))
	for i := range r.Tensors {
		t := &r.Tensors[i]
		n, err := t.NumBytes()
		if err != nil {
			return err
		}
		for _, dim := range t.Dims {
			if dim > math.MaxInt32 {
				return fmt.Errorf("tensor %q: dimension %d is not plausible", t.Name, dim)
			}
		}
		if t.Offset%r.Alignment != 0 {
			return fmt.Errorf("tensor %q: offset %d is not aligned to %d", t.Name, t.Offset, r.Alignment)
		}
		if t.Offset > dataSize || n > dataSize-t.Offset {
			return fmt.Errorf("truncated: tensor %q (%s %v, %d bytes at data offset %d) ends at byte %d of the file, which has %d",
				t.Name, t.Type, t.Dims, n, t.Offset, uint64(r.DataOffset)+t.Offset+n, size)
		}
	}
	return nil
}

func align(n, a uint64) uint64 { return (n + a - 1) / a * a }

// value reads one value of type t (depth counts array nesting).
func (d *decoder) value(t ValueType, key string, depth int) (any, error) {
	switch t {
	case TypeString:
		return d.str("string")
	case TypeArray:
		if depth > 4 {
			return nil, errors.New("arrays nested too deep")
		}
		et, err := d.u32()
		if err != nil {
			return nil, err
		}
		return d.array(ValueType(et), key, depth)
	}
	n := t.size()
	if n == 0 {
		return nil, fmt.Errorf("unknown value type %d", uint32(t))
	}
	b, err := d.read(n)
	if err != nil {
		return nil, err
	}
	return scalar(t, b), nil
}

func scalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeBool:
		return b[0] != 0
	case TypeUint16:
		return le.Uint16(b)
	case TypeInt16:
		return int16(le.Uint16(b))
	case TypeUint32:
		return le.Uint32(b)
	case TypeInt32:
		return int32(le.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b))
	case TypeUint64:
		return le.Uint64(b)
	case TypeInt64:
		return int64(le.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	panic("gguf: not a scalar type")
}

func (d *decoder) array(et ValueType, key string, depth int) (any, error) {
	minSize := et.size()
	if et == TypeString || et == TypeArray {
		minSize = 8
	}
	if minSize == 0 {
		return nil, fmt.Errorf("array of unknown value type %d", uint32(et))
	}
	n, err := d.count(minSize, "array length")
	if err != nil {
		return nil, err
	}
	switch et {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			if out[i], err = d.str("string"); err != nil {
				return nil, err
			}
		}
		return out, nil
	case TypeArray:
		out := make([]any, n)
		for i := range out {
			if out[i], err = d.value(TypeArray, key, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	raw := make([]byte, n*minSize)
	if _, err := io.ReadFull(d.r, raw); err != nil {
		return nil, errTruncated
	}
	d.pos += int64(len(raw))
	switch et {
	case TypeUint8:
		return raw, nil
	case TypeInt8:
		return fill[int8](raw, et, n), nil
	case TypeBool:
		return fill[bool](raw, et, n), nil
	case TypeUint16:
		return fill[uint16](raw, et, n), nil
	case TypeInt16:
		return fill[int16](raw, et, n), nil
	case TypeUint32:
		return fill[uint32](raw, et, n), nil
	case TypeInt32:
		return fill[int32](raw, et, n), nil
	case TypeFloat32:
		return fill[float32](raw, et, n), nil
	case TypeUint64:
		return fill[uint64](raw, et, n), nil
	case TypeInt64:
		return fill[int64](raw, et, n), nil
	default: // TypeFloat64
		return fill[float64](raw, et, n), nil
	}
}

func fill[T any](raw []byte, et ValueType, n int) []T {
	out := make([]T, n)
	size := et.size()
	for i := range out {
		out[i] = scalar(et, raw[i*size:(i+1)*size]).(T)
	}
	return out
}

// Value returns the metadata value of key.
func (r *Reader) Value(key string) (any, bool) {
	i, ok := r.meta[key]
	if !ok {
		return nil, false
	}
	return r.Metadata[i].Value, true
}

// String returns the string value of key.
func (r *Reader) String(key string) (string, error) {
	v, err := r.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", r.typeErr(key, v, "a string")
	}
	return s, nil
}

// Uint returns the value of key, of any integer type, as a non-negative integer.
func (r *Reader) Uint(key string) (uint64, error) {
	v, err := r.lookup(key)
	if err != nil {
		return 0, err
	}
	u, ok := toUint(v)
	if !ok {
		return 0, r.typeErr(key, v, "a non-negative integer")
	}
	return u, nil
}

// Float returns the value of key, of any numeric type, as a float64.
func (r *Reader) Float(key string) (float64, error) {
	v, err := r.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	if u, ok := toUint(v); ok {
		return float64(u), nil
	}
	return 0, r.typeErr(key, v, "a number")
}

// Bool returns the boolean value of key.
func (r *Reader) Bool(key string) (bool, error) {
	v, err := r.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, r.typeErr(key, v, "a bool")
	}
	return b, nil
}

// Strings returns the string array value of key.
func (r *Reader) Strings(key string) ([]string, error) {
	v, err := r.lookup(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.([]string)
	if !ok {
		return nil, r.typeErr(key, v, "an array of strings")
	}
	return s, nil
}

// Ints returns the integer array value of key (any integer element type) as ints.
func (r *Reader) Ints(key string) ([]int, error) {
	v, err := r.lookup(key)
	if err != nil {
		return nil, err
	}
	var out []int
	switch x := v.(type) {
	case []int32:
		out = make([]int, len(x))
		for i, e := range x {
			out[i] = int(e)
		}
	case []uint32:
		out = make([]int, len(x))
		for i, e := range x {
			out[i] = int(e)
		}
	case []int64:
		out = make([]int, len(x))
		for i, e := range x {
			out[i] = int(e)
		}
	case []uint8:
		out = make([]int, len(x))
		for i, e := range x {
			out[i] = int(e)
		}
	case []int8:
		out = make([]int, len(x))
		for i, e := range x {
			out[i] = int(e)
		}
	default:
		return nil, r.typeErr(key, v, "an array of integers")
	}
	return out, nil
}

func (r *Reader) lookup(key string) (any, error) {
	v, ok := r.Value(key)
	if !ok {
		return nil, fmt.Errorf("gguf %s: metadata %q missing", r.path, key)
	}
	return v, nil
}

func (r *Reader) typeErr(key string, v any, want string) error {
	return fmt.Errorf("gguf %s: metadata %q is %T, want %s", r.path, key, v, want)
}

// toUint converts any integer value that is not negative.
func toUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// Tensor returns the info of the named tensor.
func (r *Reader) Tensor(name string) (*TensorInfo, bool) {
	i, ok := r.byName[name]
	if !ok {
		return nil, false
	}
	return &r.Tensors[i], true
}

// Raw returns the named tensor's data as stored.
func (r *Reader) Raw(name string) ([]byte, error) {
	t, ok := r.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf %s: no tensor %q", r.path, name)
	}
	n, err := t.NumBytes()
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", r.path, err)
	}
	buf := make([]byte, n)
	if _, err := r.f.ReadAt(buf, r.DataOffset+int64(t.Offset)); err != nil {
		return nil, fmt.Errorf("gguf %s: read tensor %q: %w", r.path, name, err)
	}
	return buf, nil
}

// Float32 returns the named tensor's values as float32 in ggml's order (Dims[0]
// fastest, which is row-major over Shape), dequantized from any type of
// DequantizableTypes. Other types are an error naming the type and the tensor.
func (r *Reader) Float32(name string) ([]float32, error) {
	t, ok := r.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf %s: no tensor %q", r.path, name)
	}
	if !CanDequantize(t.Type) {
		return nil, fmt.Errorf("gguf %s: tensor %q has type %s; supported: %s", r.path, name, t.Type, supportedList())
	}
	raw, err := r.Raw(name)
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.NumElements())
	if err := Dequantize(out, raw, t.Type); err != nil {
		return nil, fmt.Errorf("gguf %s: tensor %q: %w", r.path, name, err)
	}
	return out, nil
}

func supportedList() string {
	types := DequantizableTypes()
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}
