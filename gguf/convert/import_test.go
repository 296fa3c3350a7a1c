package convert

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestImportGGUFRejects: an unsupported quantization, architecture, a truncated file and a file without model
// metadata are refused with errors that name them, and nothing is written.
func TestImportGGUFRejects(t *testing.T) {
	full, err := os.ReadFile(tinyGGUF("tiny-llama.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := []byte("general.architecture")
	i := bytes.Index(full, key) + len(key) + 4 + 8 // type, string length
	gemma := slices.Clone(full)
	copy(gemma[i:], "gemma")
	// blk.0.attn_q.weight's type, Q4_0, becomes IQ4_NL, which has the same block size: a type it cannot import.
	name := []byte("blk.0.attn_q.weight")
	i = bytes.Index(full, name) + len(name) + 4 + 2*8 // n_dims, two dims
	iq4nl := slices.Clone(full)
	binary.LittleEndian.PutUint32(iq4nl[i:], 20)
	for _, c := range []struct{ name, path, want string }{
		{"IQ4_NL", write("iq4nl.gguf", iq4nl), "tensor blk.0.attn_q.weight has type IQ4_NL, which cannot be imported (supported: [F32 F16 BF16 Q8_0"},
		{"architecture", write("gemma.gguf", gemma), `architecture "gemma" is not supported`},
		{"truncated", write("cut.gguf", full[:len(full)-100]), "truncated: tensor"},
		{"no model metadata", filepath.Join("..", "testdata", "types.gguf"), `"llama.block_count" missing`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(tmp, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			_, err := ImportGGUF(c.path, out, ImportOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written", out)
			}
		})
	}
}

// TestImportRefusesAbsurdBlockCount: issue 29's GGUF with
// llama.block_count = 2000000000 (23 GB before the kernel killed it) is
// refused against the blocks present.
func TestImportRefusesAbsurdBlockCount(t *testing.T) {
	full, err := os.ReadFile(tinyGGUF("tiny-llama.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("llama.block_count")
	i := bytes.Index(full, key) + len(key)
	b := bytes.Clone(full)
	switch typ := binary.LittleEndian.Uint32(b[i:]); typ {
	case 4, 5: // uint32, int32
		binary.LittleEndian.PutUint32(b[i+4:], 2_000_000_000)
	case 10, 11: // uint64, int64
		binary.LittleEndian.PutUint64(b[i+4:], 2_000_000_000)
	default:
		t.Fatalf("block_count has GGUF type %d", typ)
	}
	path := filepath.Join(t.TempDir(), "absurd.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = ImportGGUF(path, out, ImportOptions{})
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("refusing the file allocated %d MB", n>>20)
	}
	if err == nil || !strings.Contains(err.Error(), "block_count is 2000000000") {
		t.Fatalf("ImportGGUF: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the import wrote its directory")
	}
}
