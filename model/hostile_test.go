package model

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// copyModelDir copies testdata/untied to a temporary directory, editing its config.json.
func copyModelDir(t *testing.T, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		b, err := os.ReadFile(filepath.Join("testdata/untied", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			b = []byte(edit(string(b)))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLoadRefusesAbsurdLayerCount: issue 29's config.json with
// num_hidden_layers 2000000000 is refused against the tensors present,
// before the per-layer parameters are listed.
func TestLoadRefusesAbsurdLayerCount(t *testing.T) {
	dir := copyModelDir(t, func(s string) string {
		return strings.Replace(s, `"num_hidden_layers": 2`, `"num_hidden_layers": 2000000000`, 1)
	})
	backend := testBackend(t)
	var err error
	if n := allocated(func() { _, err = Load(backend, dir) }); n > 64<<20 {
		t.Errorf("refusing the config allocated %d MB", n>>20)
	}
	if err == nil || !strings.Contains(err.Error(), "num_hidden_layers 2000000000") || !strings.Contains(err.Error(), "2 layers") {
		t.Fatalf("Load: %v", err)
	}
}

// TestLoadWarnsNonFinite: NaN and infinite weights load, and a warning
// names the tensor and the counts.
func TestLoadWarnsNonFinite(t *testing.T) {
	backend := testBackend(t)
	m, err := Load(backend, "testdata/untied")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.NonFinite) != 0 {
		t.Fatalf("a finite model: %v", m.NonFinite)
	}
	dir := t.TempDir()
	b, _ := os.ReadFile("testdata/untied/config.json")
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	var ts []stTensor
	for _, n := range m.Config.TensorNames() {
		data, shape, _ := m.Tensor(n)
		if n == "model.layers.1.mlp.up_proj.weight" {
			data[0], data[5], data[7] = float32(math.NaN()), float32(math.NaN()), float32(math.Inf(-1))
		}
		ts = append(ts, stTensor{name: n, shape: shape, data: data})
	}
	if err := writeSafetensors(filepath.Join(dir, "model.safetensors"), ts, "F32"); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))
	defer slog.SetDefault(prev)
	m2, err := Load(backend, dir)
	if err != nil {
		t.Fatalf("a model with NaN weights does not load: %v", err)
	}
	want := "model.layers.1.mlp.up_proj.weight: 2 NaN, 1 infinite of 1536 values"
	if len(m2.NonFinite) != 1 || m2.NonFinite[0] != want {
		t.Errorf("NonFinite = %v, want [%s]", m2.NonFinite, want)
	}
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), want) {
		t.Errorf("warning: %q", log.String())
	}
}
