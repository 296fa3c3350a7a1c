package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// tinyBatch reads the tokens and mask of tiny_gguf_golden.json.
func tinyBatch(t *testing.T) (toks, mask [][]int32) {
	t.Helper()
	data, err := os.ReadFile("testdata/tiny_gguf_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Tokens [][]int32 `json:"tokens"`
		Mask   [][]int32 `json:"attention_mask"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g.Tokens, g.Mask
}

// importTiny imports testdata/tiny-ARCH.gguf and loads it.
func importTiny(t *testing.T, arch string) *Model {
	t.Helper()
	dir := t.TempDir()
	if _, err := ImportGGUF(filepath.Join("testdata", "tiny-"+arch+".gguf"), dir, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func maxValidDiff(got []float32, want []float64, mask [][]int32) float64 {
	T := len(mask[0])
	V := len(got) / (len(mask) * T)
	d := 0.0
	for b := range mask {
		for tt := range T {
			if mask[b][tt] == 0 {
				continue
			}
			for v := range V {
				i := (b*T+tt)*V + v
				d = math.Max(d, math.Abs(float64(got[i])-want[i]))
			}
		}
	}
	return d
}

// validDiffs accumulates logitDiffs over the positions mask keeps.
func validDiffs(got []float32, want32, want64 []float64, mask [][]int32) *logitDiffs {
	T := len(mask[0])
	V := len(got) / (len(mask) * T)
	var d logitDiffs
	for b := range mask {
		for tt := range T {
			if mask[b][tt] == 0 {
				continue
			}
			for v := range V {
				i := (b*T+tt)*V + v
				d.add(float64(got[i]), want32[i], want64[i])
			}
		}
	}
	return &d
}

// TestLoRAMatchesPeft: adapters that peft saved for the tiny Llama and Qwen2 (testdata/gen_lora_golden.py) load and
// give the PeftModel's logits; saved again they are peft's tensors under peft's names; merged into the base they
// give merge_and_unload()'s logits: no further from peft's float64 answer than three times its float32 one (logitDiffs).
func TestLoRAMatchesPeft(t *testing.T) {
	data, err := os.ReadFile("testdata/lora_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]struct {
		Logits         []float64 `json:"logits"`
		MergedLogits   []float64 `json:"merged_logits"`
		Logits64       []float64 `json:"logits64"`
		MergedLogits64 []float64 `json:"merged_logits64"`
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	toks, mask := tinyBatch(t)
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			m := importTiny(t, arch)
			base := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			adapter := filepath.Join("testdata", "lora-"+arch)
			if err := m.LoadAdapter(adapter); err != nil {
				t.Fatal(err)
			}
			logits := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			moved := maxValidDiff(base, golden[arch].Logits, mask)
			t.Logf("the adapter moves logits by up to %.3g", moved)
			if moved < 0.1 {
				t.Errorf("the adapter moves logits by %g only", moved)
			}
			validDiffs(logits, golden[arch].Logits, golden[arch].Logits64, mask).check(t, "logits with the adapter")

			out := t.TempDir()
			if err := m.SaveAdapter(out); err != nil {
				t.Fatal(err)
			}
			ours, err := LoadTensors(filepath.Join(out, "adapter_model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			peft, err := LoadTensors(filepath.Join(adapter, "adapter_model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			if len(ours) != len(peft) {
				t.Fatalf("saved %d tensors, peft %d", len(ours), len(peft))
			}
			for name, p := range peft {
				o, ok := ours[name]
				if !ok || !slices.Equal(o.Shape().Dimensions, p.Shape().Dimensions) ||
					!slices.Equal(tensors.MustCopyFlatData[float32](o), tensors.MustCopyFlatData[float32](p)) {
					t.Errorf("saved adapter: %s differs from peft's", name)
				}
			}

			if err := m.Merge(); err != nil {
				t.Fatal(err)
			}
			merged := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			validDiffs(merged, golden[arch].MergedLogits, golden[arch].MergedLogits64, mask).check(t, "merged logits")
			if m.LoRA() != nil || len(TrainableNames(m)) != len(m.Config.params()) {
				t.Error("after Merge the adapter is still attached or base weights are frozen")
			}
		})
	}
}

// TrainableNames lists the scope/name of m's trainable variables.
func TrainableNames(m *Model) []string {
	var names []string
	for v := range m.Ctx.IterVariables() {
		if v.Trainable {
			names = append(names, v.ScopeAndName())
		}
	}
	return names
}

// TestAddLoRA: a fresh adapter leaves the logits unchanged, freezes the base weights and is what trains; saved and
// loaded back into another copy of the base it gives the same logits.
func TestAddLoRA(t *testing.T) {
	toks, mask := tinyBatch(t)
	m := importTiny(t, "llama")
	base := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
	cfg := LoRAConfig{R: 2, Alpha: 4, TargetModules: []string{"all-linear"}}
	if err := m.AddLoRA(cfg, 1); err != nil {
		t.Fatal(err)
	}
	same := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
	if !slices.Equal(base, same) {
		t.Error("a fresh adapter (B = 0) changed the logits")
	}
	names := TrainableNames(m)
	if want := 2 * 7 * m.Config.NumHiddenLayers; len(names) != want {
		t.Errorf("%d trainable variables, want %d (lora_A and lora_B of 7 modules x %d layers)", len(names), want, m.Config.NumHiddenLayers)
	}
	for _, n := range names {
		if !strings.Contains(n, "/lora_A/") && !strings.Contains(n, "/lora_B/") {
			t.Errorf("base variable %s is trainable", n)
		}
	}
	// Give B values, save, load into a fresh copy: same logits.
	for v := range m.Ctx.IterVariables() {
		if strings.Contains(v.Scope(), "/lora_B") {
			vals := make([]float32, v.Shape().Size())
			for i := range vals {
				vals[i] = float32(i%7-3) * 0.01
			}
			if err := v.SetValue(tensors.FromFlatDataAndDimensions(vals, v.Shape().Dimensions...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
	dir := t.TempDir()
	if err := m.SaveAdapter(dir); err != nil {
		t.Fatal(err)
	}
	m2 := importTiny(t, "llama")
	if err := m2.LoadAdapter(dir); err != nil {
		t.Fatal(err)
	}
	got := run(t, m2, m2.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
	if !slices.Equal(got, want) {
		t.Error("saved and reloaded adapter gives other logits")
	}
	if slices.Equal(got, base) {
		t.Error("the adapter's B values changed nothing")
	}
}

func TestLoRARejects(t *testing.T) {
	m := importTiny(t, "qwen2")
	for _, c := range []struct {
		cfg  LoRAConfig
		want string
	}{
		{LoRAConfig{R: 0, Alpha: 1, TargetModules: []string{"q_proj"}}, "r must be > 0"},
		{LoRAConfig{R: 4, Alpha: 8, Dropout: 1, TargetModules: []string{"q_proj"}}, "lora_dropout must be in [0, 1), got 1"},
		{LoRAConfig{R: 4, Alpha: 8, Dropout: -0.1, TargetModules: []string{"q_proj"}}, "lora_dropout must be in [0, 1), got -0.1"},
		{LoRAConfig{R: 4, Alpha: 8, Dropout: math.NaN(), TargetModules: []string{"q_proj"}}, "lora_dropout must be in [0, 1), got NaN"},
		{LoRAConfig{R: 4, Alpha: 8, TargetModules: []string{"lm_head"}}, `target module "lm_head"`},
	} {
		if err := m.AddLoRA(c.cfg, 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddLoRA(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	// An adapter whose config names modules it has no tensors for is refused, naming the tensor.
	bad := t.TempDir()
	cfg, _ := os.ReadFile("testdata/lora-qwen2/adapter_config.json")
	st, _ := os.ReadFile("testdata/lora-qwen2/adapter_model.safetensors")
	os.WriteFile(filepath.Join(bad, "adapter_config.json"), []byte(strings.Replace(string(cfg), `"q_proj"`, `"o_proj"`, 1)), 0o644)
	os.WriteFile(filepath.Join(bad, "adapter_model.safetensors"), st, 0o644)
	if err := m.LoadAdapter(bad); err == nil || !strings.Contains(err.Error(), `o_proj.lora_A.weight" missing`) {
		t.Errorf("adapter without its tensors: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(strings.Replace(string(cfg), `"use_dora": false`, `"use_dora": true`, 1)), 0o644)
	if err := m.LoadAdapter(dir); err == nil || !strings.Contains(err.Error(), "use_dora") {
		t.Errorf("DoRA adapter: %v", err)
	}
}

// TestMergeAdapter: MergeAdapter(dir) gives the logits of LoadAdapter(dir) then Merge, returns the adapter's
// configuration, and refuses a model without an adapter (none attached, no directory given).
func TestMergeAdapter(t *testing.T) {
	toks, mask := tinyBatch(t)
	adapter := filepath.Join("testdata", "lora-llama")
	want := importTiny(t, "llama")
	if err := want.LoadAdapter(adapter); err != nil {
		t.Fatal(err)
	}
	if err := want.Merge(); err != nil {
		t.Fatal(err)
	}
	m := importTiny(t, "llama")
	lc, err := m.MergeAdapter(adapter)
	if err != nil {
		t.Fatal(err)
	}
	if lc == nil || lc.R < 1 || len(lc.TargetModules) == 0 || m.LoRA() != nil {
		t.Errorf("MergeAdapter returned %+v, adapter still attached: %v", lc, m.LoRA() != nil)
	}
	got := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
	if w := run(t, want, want.Logits, tensors.FromValue(toks), tensors.FromValue(mask)); !slices.Equal(got, w) {
		t.Error("MergeAdapter's logits differ from LoadAdapter + Merge's")
	}
	if _, err := m.MergeAdapter(""); err == nil || !strings.Contains(err.Error(), "no LoRA adapter") {
		t.Errorf("MergeAdapter without an adapter: %v, want an error saying there is none", err)
	}
}
