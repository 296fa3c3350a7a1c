package model

// A reader and writer of the safetensors format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON header {"name": {"dtype", "shape", "data_offsets": [begin, end]},
// "__metadata__": {...}}, then the raw little-endian tensor data.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"github.com/x448/float16"
)

// stEntry is one tensor in a safetensors header.
type stEntry struct {
	DType       string `json:"dtype"`
	Shape       []int  `json:"shape"`
	DataOffsets [2]int `json:"data_offsets"`
}

// stFile is an open safetensors file: its header and where its data starts.
type stFile struct {
	path    string
	f       *os.File
	entries map[string]stEntry
	base    int64
}

// maxHeaderBytes guards against reading a corrupt header length.
const maxHeaderBytes = 100 << 20

func openSafetensors(path string) (*stFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open safetensors: %w", err)
	}
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: read header length: %w", path, err)
	}
	if n > maxHeaderBytes {
		f.Close()
		return nil, fmt.Errorf("%s: header length %d is not plausible (not a safetensors file?)", path, n)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: read header: %w", path, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: parse header: %w", path, err)
	}
	st := &stFile{path: path, f: f, entries: map[string]stEntry{}, base: 8 + int64(n)}
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var e stEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: tensor %q: %w", path, name, err)
		}
		st.entries[name] = e
	}
	return st, nil
}

func (s *stFile) Close() error { return s.f.Close() }

// readF32 reads tensor name converted to float32, checking its shape.
func (s *stFile) readF32(name string, wantShape []int) ([]float32, error) {
	e, ok := s.entries[name]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q missing", s.path, name)
	}
	if !equalInts(e.Shape, wantShape) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, want %v", s.path, name, e.Shape, wantShape)
	}
	n := 1
	for _, d := range e.Shape {
		n *= d
	}
	var elem int
	switch e.DType {
	case "F32":
		elem = 4
	case "BF16", "F16":
		elem = 2
	default:
		return nil, fmt.Errorf("%s: tensor %q has dtype %s; want F32, BF16 or F16", s.path, name, e.DType)
	}
	if e.DataOffsets[1]-e.DataOffsets[0] != n*elem {
		return nil, fmt.Errorf("%s: tensor %q: data_offsets %v do not hold %d %s values", s.path, name, e.DataOffsets, n, e.DType)
	}
	buf := make([]byte, n*elem)
	if _, err := s.f.ReadAt(buf, s.base+int64(e.DataOffsets[0])); err != nil {
		return nil, fmt.Errorf("%s: read tensor %q: %w", s.path, name, err)
	}
	out := make([]float32, n)
	switch e.DType {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(buf[2*i:])) << 16)
		}
	case "F16":
		for i := range out {
			out[i] = float16.Frombits(binary.LittleEndian.Uint16(buf[2*i:])).Float32()
		}
	}
	return out, nil
}

// stTensor is a tensor to write.
type stTensor struct {
	name  string
	shape []int
	data  []float32
}

// bf16FromF32 rounds to nearest even (NaN kept a quiet NaN), as torch does.
func bf16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// writeSafetensors writes tensors (sorted by name) as dtype "F32" or "BF16".
func writeSafetensors(path string, tensors []stTensor, dtype string) error {
	elem := 4
	switch dtype {
	case "F32":
	case "BF16":
		elem = 2
	default:
		return fmt.Errorf("write safetensors: dtype %q not supported (F32 or BF16)", dtype)
	}
	sort.Slice(tensors, func(i, j int) bool { return tensors[i].name < tensors[j].name })
	// The header is a JSON object; keys are written in sorted order so output is deterministic.
	hdr := []byte(`{"__metadata__":{"format":"pt"}`)
	off := 0
	for _, t := range tensors {
		size := len(t.data) * elem
		e, err := json.Marshal(stEntry{DType: dtype, Shape: t.shape, DataOffsets: [2]int{off, off + size}})
		if err != nil {
			return err
		}
		name, _ := json.Marshal(t.name)
		hdr = append(hdr, ',')
		hdr = append(hdr, name...)
		hdr = append(hdr, ':')
		hdr = append(hdr, e...)
		off += size
	}
	hdr = append(hdr, '}')
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write safetensors: %w", err)
	}
	w := newBufWriter(f)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	w.write(lenBuf[:])
	w.write(hdr)
	var b [4]byte
	for _, t := range tensors {
		for _, v := range t.data {
			if elem == 4 {
				binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
				w.write(b[:4])
			} else {
				binary.LittleEndian.PutUint16(b[:], bf16FromF32(v))
				w.write(b[:2])
			}
		}
	}
	if err := w.flush(); err != nil {
		f.Close()
		return fmt.Errorf("write safetensors %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write safetensors %s: %w", path, err)
	}
	return nil
}

// bufWriter buffers writes and remembers the first error.
type bufWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func newBufWriter(w io.Writer) *bufWriter { return &bufWriter{w: w, buf: make([]byte, 0, 1<<20)} }

func (b *bufWriter) write(p []byte) {
	if len(b.buf)+len(p) > cap(b.buf) {
		b.flushBuf()
	}
	b.buf = append(b.buf, p...)
}

func (b *bufWriter) flushBuf() {
	if b.err == nil && len(b.buf) > 0 {
		_, b.err = b.w.Write(b.buf)
	}
	b.buf = b.buf[:0]
}

func (b *bufWriter) flush() error {
	b.flushBuf()
	return b.err
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
