package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x448/float16"
)

func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	fa, fb := dirFiles(t, a), dirFiles(t, b)
	if len(fa) != len(fb) {
		t.Errorf("%s has %d files, %s has %d", a, len(fa), b, len(fb))
	}
	for name, data := range fa {
		if !bytes.Equal(data, fb[name]) {
			t.Errorf("%s differs between %s and %s", name, a, b)
		}
	}
}

// TestSaveLoadSave: load (sharded f32 untied; bf16 tied) -> save -> load -> save gives byte-identical directories,
// in float32, bfloat16 and sharded form, and the reloaded weights equal the originals.
func TestSaveLoadSave(t *testing.T) {
	backend := testBackend(t)
	for _, src := range []string{"untied", "tied"} {
		for _, opts := range []SaveOptions{{}, {DType: "bfloat16"}, {MaxShardBytes: 40000}} {
			name := src + "-" + opts.DType
			if opts.MaxShardBytes > 0 {
				name += "-sharded"
			}
			t.Run(name, func(t *testing.T) {
				m, err := Load(backend, filepath.Join("testdata", src))
				if err != nil {
					t.Fatal(err)
				}
				a, b := t.TempDir(), t.TempDir()
				if err := m.Save(a, opts); err != nil {
					t.Fatal(err)
				}
				m2, err := Load(backend, a)
				if err != nil {
					t.Fatal(err)
				}
				if err := m2.Save(b, opts); err != nil {
					t.Fatal(err)
				}
				sameFiles(t, a, b)
				if opts.MaxShardBytes > 0 {
					if _, err := os.Stat(filepath.Join(a, "model.safetensors.index.json")); err != nil {
						t.Errorf("sharded save wrote no index: %v", err)
					}
				}
				// f32 saves (and bf16 saves of bf16 sources) are lossless.
				if opts.DType == "" || src == "tied" {
					for _, n := range m.Config.TensorNames() {
						x, _, _ := m.Tensor(n)
						y, _, _ := m2.Tensor(n)
						for i := range x {
							if x[i] != y[i] {
								t.Fatalf("%s[%d]: %v != %v after round trip", n, i, x[i], y[i])
							}
						}
					}
				}
			})
		}
	}
}

// TestSaveWritesHFDirectory: config.json keeps the HF fields, tied checkpoints have no lm_head, tokenizer files
// are copied.
func TestSaveWritesHFDirectory(t *testing.T) {
	m, err := Load(testBackend(t), "testdata/tied")
	if err != nil {
		t.Fatal(err)
	}
	tokDir := t.TempDir()
	os.WriteFile(filepath.Join(tokDir, "tokenizer.json"), []byte(`{"model":{}}`), 0o644)
	dir := t.TempDir()
	if err := m.Save(dir, SaveOptions{DType: "bfloat16", TokenizerDir: tokDir}); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TorchDType != "bfloat16" || !cfg.TieWordEmbeddings || cfg.VocabSize != 96 || cfg.EOSTokenID[0] != 2 {
		t.Errorf("config.json round trip: %+v", cfg)
	}
	st, err := openSafetensors(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.entries["lm_head.weight"]; ok {
		t.Errorf("tied checkpoint wrote lm_head.weight")
	}
	if e := st.entries["model.embed_tokens.weight"]; e.DType != "BF16" {
		t.Errorf("embed dtype %s, want BF16", e.DType)
	}
	for _, f := range []string{"generation_config.json", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
}

// TestLoadErrors: a missing tensor, a wrong shape and a non-Qwen2 architecture fail with errors naming them.
func TestLoadErrors(t *testing.T) {
	backend := testBackend(t)
	m, err := Load(backend, "testdata/untied")
	if err != nil {
		t.Fatal(err)
	}
	write := func(t *testing.T, cfgEdit func(string) string, drop string, reshape string) string {
		dir := t.TempDir()
		cfg, _ := os.ReadFile("testdata/untied/config.json")
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfgEdit(string(cfg))), 0o644)
		var ts []stTensor
		for _, n := range m.Config.TensorNames() {
			if n == drop {
				continue
			}
			data, shape, _ := m.Tensor(n)
			if n == reshape {
				shape = []int{shape[0] * shape[1]}
			}
			ts = append(ts, stTensor{name: n, shape: shape, data: data})
		}
		if err := writeSafetensors(filepath.Join(dir, "model.safetensors"), ts, "F32"); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	same := func(s string) string { return s }
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"missing", write(t, same, "model.layers.1.mlp.up_proj.weight", ""), `tensor "model.layers.1.mlp.up_proj.weight" missing`},
		{"missing lm_head", write(t, same, "lm_head.weight", ""), `tensor "lm_head.weight" missing`},
		{"shape", write(t, same, "", "model.layers.0.self_attn.k_proj.weight"), `"model.layers.0.self_attn.k_proj.weight" has shape [512], want [16 32]`},
		{"architecture", write(t, func(s string) string {
			return strings.NewReplacer("Qwen2ForCausalLM", "MistralForCausalLM", `"qwen2"`, `"mistral"`).Replace(s)
		}, "", ""), "[MistralForCausalLM] is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(backend, tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestReadF16: float16 tensors are read (values checked against x448/float16's encoding).
func TestReadF16(t *testing.T) {
	vals := []float32{0, 1, -2.5, 65504, 0.000061035156}
	var raw bytes.Buffer
	for _, v := range vals {
		binary.Write(&raw, binary.LittleEndian, float16.Fromfloat32(v).Bits())
	}
	hdr := []byte(`{"x":{"dtype":"F16","shape":[5],"data_offsets":[0,10]}}`)
	var f bytes.Buffer
	binary.Write(&f, binary.LittleEndian, uint64(len(hdr)))
	f.Write(hdr)
	f.Write(raw.Bytes())
	path := filepath.Join(t.TempDir(), "x.safetensors")
	os.WriteFile(path, f.Bytes(), 0o644)
	st, err := openSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.readF32("x", []int{5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range vals {
		if got[i] != vals[i] {
			t.Errorf("x[%d] = %v, want %v", i, got[i], vals[i])
		}
	}
	if _, err := st.readF32("x", []int{4}); err == nil {
		t.Errorf("wrong shape accepted")
	}
}

func TestBF16Rounding(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{{0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81}, {0x7f800000, 0x7f80}} {
		f := float32frombits(c.in)
		if got := bf16FromF32(f); got != c.want {
			t.Errorf("bf16(%#x) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

func float32frombits(b uint32) float32 { return math.Float32frombits(b) }

// TestLoadRefusesUnsupported: checkpoints that transformers wrote with what mcprl cannot compute (float64 or
// integer weights, a tensor Qwen2 lacks, a scaled rotary embedding; testdata/gen_golden.py) are refused with an
// error naming the tensor or key, never loaded with a part ignored.
func TestLoadRefusesUnsupported(t *testing.T) {
	backend := testBackend(t)
	for _, tc := range []struct{ dir, want string }{
		{"f64", `tensor "model.embed_tokens.weight" has dtype F64`},
		{"int8", `tensor "model.layers.0.mlp.up_proj.weight" has dtype I8`},
		{"extra", `tensor "model.layers.1.self_attn.o_proj.bias" is not a parameter`},
		{"yarn", "rope_parameters.rope_type yarn is not supported"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			_, err := Load(backend, filepath.Join("testdata/unsupported", tc.dir))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
