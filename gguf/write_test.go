package gguf_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/gguf"
)

// rewrite writes the metadata and tensors of the file at path with gguf.Write.
func rewrite(t *testing.T, path string) []byte {
	t.Helper()
	r := open(t, path)
	tensors := make([]gguf.WriteTensor, len(r.Tensors))
	for i, info := range r.Tensors {
		tensors[i] = gguf.WriteTensor{Name: info.Name, Type: info.Type, Shape: info.Shape(),
			Data: func() ([]byte, error) { return r.Raw(info.Name) }}
	}
	var b bytes.Buffer
	if err := gguf.Write(&b, r.Metadata, tensors); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestWriteMatchesGGUFPy rewrites files that gguf-py's GGUFWriter wrote (metadata of every value type, arrays of
// arrays, tensors of rank 1 to 3 and of eight ggml types) and gets the same bytes.
func TestWriteMatchesGGUFPy(t *testing.T) {
	for _, name := range []string{"types.gguf", "expected.gguf", "quant.gguf"} {
		want, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if got := rewrite(t, "testdata/"+name); !bytes.Equal(got, want) {
			t.Errorf("%s: rewritten file differs (%d bytes, want %d), first at byte %d", name, len(got), len(want), firstDiff(got, want))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestQuantizeMatchesGGUFPy encodes float32 values as F16 and Q8_0 and gets gguf-py's bytes
// (testdata/gen_quant.py: zero blocks, ties, float16 subnormals and overflow among them).
func TestQuantizeMatchesGGUFPy(t *testing.T) {
	r := open(t, "testdata/quant.gguf")
	src, err := r.Float32("source")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []gguf.TensorType{gguf.F32, gguf.F16, gguf.Q8_0} {
		name := map[gguf.TensorType]string{gguf.F32: "source", gguf.F16: "f16", gguf.Q8_0: "q8_0"}[typ]
		want, err := r.Raw(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gguf.Quantize(typ, src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: differs from gguf-py's at byte %d of %d", typ, firstDiff(got, want), len(want))
		}
	}
	if _, err := gguf.Quantize(gguf.Q8_0, make([]float32, 33)); err == nil || !strings.Contains(err.Error(), "33 values") {
		t.Errorf("33 values as Q8_0: %v", err)
	}
	if _, err := gguf.Quantize(gguf.TensorType(12), src); err == nil || !strings.Contains(err.Error(), "Q4_K") {
		t.Errorf("Q4_K: %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	f32 := func(shape ...int) gguf.WriteTensor {
		n := 1
		for _, s := range shape {
			n *= s
		}
		return gguf.WriteTensor{Name: "w", Type: gguf.F32, Shape: shape,
			Data: func() ([]byte, error) { return make([]byte, 4*n), nil }}
	}
	q := f32(3, 40)
	q.Type = gguf.Q8_0
	short := f32(2, 2)
	short.Data = func() ([]byte, error) { return make([]byte, 12), nil }
	failing := f32(2)
	failing.Data = func() ([]byte, error) { return nil, errors.New("disk on fire") }
	for _, c := range []struct {
		name    string
		meta    []gguf.KV
		tensors []gguf.WriteTensor
		want    string
	}{
		{"duplicate key", []gguf.KV{{"a", uint32(1)}, {"a", uint32(2)}}, nil, `key "a" appears twice`},
		{"unsupported value", []gguf.KV{{"a", 3}}, nil, `metadata "a": value of type int cannot be written`},
		{"array of a map", []gguf.KV{{"a", []any{map[string]int{}}}}, nil, "element 0 of an array of arrays"},
		{"alignment", []gguf.KV{{gguf.KeyAlignment, uint32(24)}}, nil, "not a power of two"},
		{"duplicate tensor", nil, []gguf.WriteTensor{f32(2), f32(3)}, `tensor "w" appears twice`},
		{"partial block", nil, []gguf.WriteTensor{q}, "row of 40 values is not a whole number of Q8_0 blocks"},
		{"short data", nil, []gguf.WriteTensor{short}, `tensor "w" (F32, shape [2 2]): 12 bytes of data, want 16`},
		{"data error", nil, []gguf.WriteTensor{failing}, `tensor "w": disk on fire`},
		{"no shape", nil, []gguf.WriteTensor{f32()}, "0 dimensions"},
	} {
		var b bytes.Buffer
		err := gguf.Write(&b, c.meta, c.tensors)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
		if c.tensors == nil && b.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error", c.name, b.Len())
		}
	}
}

// TestWriteRoundTrip reads back what Write wrote, with a larger alignment and every value type.
func TestWriteRoundTrip(t *testing.T) {
	meta := []gguf.KV{
		{"general.architecture", "qwen2"}, {gguf.KeyAlignment, uint32(64)}, {"u8s", []uint8{1, 2}},
		{"bools", []bool{true, false}}, {"f64s", []float64{0.25}}, {"i64", int64(-3)}, {"empty", []string{}},
	}
	vals := []float32{1, -2, 3.5, 0, 1e-3, 7, 8, 9}
	data, _ := gguf.Quantize(gguf.F16, vals)
	tensors := []gguf.WriteTensor{
		{Name: "a", Type: gguf.F16, Shape: []int{2, 4}, Data: func() ([]byte, error) { return data, nil }},
		{Name: "b", Type: gguf.F16, Shape: []int{8}, Data: func() ([]byte, error) { return data, nil }},
	}
	path := t.TempDir() + "/x.gguf"
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(f, meta, tensors); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := open(t, path)
	if r.Alignment != 64 || len(r.Metadata) != len(meta) {
		t.Fatalf("alignment %d, %d entries", r.Alignment, len(r.Metadata))
	}
	for i, kv := range meta {
		if got := r.Metadata[i]; got.Key != kv.Key || !equalValue(got.Value, kv.Value) {
			t.Errorf("entry %d = %#v, want %#v", i, got, kv)
		}
	}
	for _, name := range []string{"a", "b"} {
		got, err := r.Float32(name)
		if err != nil || len(got) != 8 || got[2] != 3.5 || got[7] != 9 {
			t.Errorf("%s = %v, %v", name, got, err)
		}
		if info, _ := r.Tensor(name); info.Offset%64 != 0 {
			t.Errorf("%s at offset %d", name, info.Offset)
		}
	}
}

func equalValue(a, b any) bool {
	return strings.TrimSpace(fmtValue(a)) == strings.TrimSpace(fmtValue(b))
}

func fmtValue(v any) string { return fmt.Sprintf("%T %v", v, v) }
