package model

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/internal/enginetest"
)

// greedyTokens decodes testPrompts greedily for n tokens.
func greedyTokens(t testing.TB, m *Model, n int) [][]int {
	t.Helper()
	toks, err := m.GreedyNoCache(context.Background(), testPrompts, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// perturbTrainable moves every trainable variable of m by noise of the given scale, as optimizer steps would.
func perturbTrainable(t testing.TB, m *Model, scale float64, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	for v := range m.Ctx.IterVariables() {
		if !v.Trainable || !isModelScope(v.Scope()) {
			continue
		}
		value, err := v.Value()
		if err != nil {
			t.Fatal(err)
		}
		data := tensors.MustCopyFlatData[float32](value)
		for i := range data {
			data[i] += float32(rng.NormFloat64() * scale)
		}
		if err := v.SetValue(tensors.FromFlatDataAndDimensions(data, value.Shape().Dimensions...)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplicaRefresh: for every pair of engines (the source's, the copy's; simplego to simplego on two backends
// where XLA is absent), a copy of a LoRA model with trainable token rows decodes greedily what the source does;
// after the source's trainable weights move, the copy still decodes the old tokens until Refresh, and then the
// source's new ones. A refresh copies the adapter and the token rows only.
func TestReplicaRefresh(t *testing.T) {
	engines := enginetest.Engines()
	for _, from := range engines {
		for _, to := range engines {
			t.Run(from+"_to_"+to, func(t *testing.T) {
				src, err := New(engineBackend(t, Engine(from)), tinyTestConfig(), 7)
				if err != nil {
					t.Fatal(err)
				}
				lora := LoRAConfig{R: 4, Alpha: 8, TargetModules: []string{"all-linear"}, TrainableTokenIndices: []int{3, 40}}
				if err := src.AddLoRA(lora, 5); err != nil {
					t.Fatal(err)
				}
				r, err := NewReplica(src, engineBackend(t, Engine(to)), false)
				if err != nil {
					t.Fatal(err)
				}
				if r.Model.Backend == src.Backend {
					t.Fatal("the copy runs on the source's backend")
				}
				// Two layers x seven modules x (A, B), and the token rows.
				n, bytes := r.Synced()
				if want := 2*7*2 + 1; n != want {
					t.Errorf("a refresh copies %d tensors, want %d (the adapter and the token rows)", n, want)
				}
				if bytes <= 0 || bytes > 200_000 {
					t.Errorf("a refresh copies %d bytes", bytes)
				}
				const steps = 10
				before := greedyTokens(t, src, steps)
				if got := greedyTokens(t, r.Model, steps); !slices.EqualFunc(got, before, slices.Equal) {
					t.Fatalf("copy %v, source %v before training", got, before)
				}
				perturbTrainable(t, src, 0.3, 9)
				after := greedyTokens(t, src, steps)
				if slices.EqualFunc(after, before, slices.Equal) {
					t.Fatalf("the perturbation changed no greedy token (%v): the comparison proves nothing", after)
				}
				if got := greedyTokens(t, r.Model, steps); !slices.EqualFunc(got, before, slices.Equal) {
					t.Fatalf("the copy changed before Refresh: %v, want %v", got, before)
				}
				if err := r.Refresh(); err != nil {
					t.Fatal(err)
				}
				if got := greedyTokens(t, r.Model, steps); !slices.EqualFunc(got, after, slices.Equal) {
					t.Errorf("refreshed copy %v, source %v", got, after)
				}
			})
		}
	}
}

// Without an adapter every weight trains, and a refresh copies them all.
func TestReplicaFullModel(t *testing.T) {
	src := newTestModel(t, 3)
	r, err := NewReplica(src, testBackend(t), false)
	if err != nil {
		t.Fatal(err)
	}
	n, bytes := r.Synced()
	var want int
	var wantBytes int64
	for _, p := range src.Config.params() {
		want++
		size := int64(4)
		for _, d := range p.shape {
			size *= int64(d)
		}
		wantBytes += size
	}
	if n != want || bytes != wantBytes {
		t.Errorf("a refresh copies %d tensors of %d bytes, want %d of %d", n, bytes, want, wantBytes)
	}
	perturbTrainable(t, src, 0.05, 4)
	if err := r.Refresh(); err != nil {
		t.Fatal(err)
	}
	for _, name := range src.Config.TensorNames() {
		a, _, err := src.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := r.Model.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a, b) {
			t.Fatalf("%s differs after Refresh", name)
		}
	}
}

// BenchmarkReplicaRefresh times a refresh of a sampling copy (simplego to simplego: a refresh is host copies,
// whatever the engines) for the tiny default model and SmolLM2-135M's shape, with LoRA r 16 on every linear
// layer and two trainable token rows (examples/smollm2's adapter), and without an adapter (every weight):
//
//	go test ./model -run '^$' -bench ReplicaRefresh -benchtime 10x
func BenchmarkReplicaRefresh(b *testing.B) {
	smol := TinyConfig(49152, 1, 2)
	smol.HiddenSize, smol.IntermediateSize, smol.NumHiddenLayers, smol.NumAttentionHeads, smol.NumKeyValueHeads = 576, 1536, 30, 9, 3
	for _, c := range []struct {
		name string
		cfg  *Config
	}{{"tiny", benchConfig()}, {"smollm2-135m", smol}} {
		for _, lora := range []bool{true, false} {
			name := c.name + "/full"
			if lora {
				name = c.name + "/lora-r16"
			}
			b.Run(name, func(b *testing.B) {
				src, err := New(testBackend(b), c.cfg, 1)
				if err != nil {
					b.Fatal(err)
				}
				if lora {
					l := LoRAConfig{R: 16, Alpha: 32, TargetModules: []string{"all-linear"}, TrainableTokenIndices: []int{0, 1}}
					if err := src.AddLoRA(l, 1); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				r, err := NewReplica(src, testBackend(b), false)
				if err != nil {
					b.Fatal(err)
				}
				copied := time.Since(start)
				b.ResetTimer()
				for range b.N {
					if err := r.Refresh(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				_, bytes := r.Synced()
				b.ReportMetric(float64(bytes)/(1<<20), "MiB/refresh")
				b.ReportMetric(copied.Seconds(), "copy-s")
			})
		}
	}
}

// TestReplicaBF16: a copy made with bf16 on XLA samples what the source run in bfloat16 would (SetBF16 on a
// model built the same way: the same log-probs bit for bit, before and after the source's adapter and token rows
// move and Refresh copies them); its base weights are bfloat16, the adapter float32. Without an adapter, every
// weight of the copy is the source's rounded to bfloat16, after Refresh too. On simplego it is refused.
func TestReplicaBF16(t *testing.T) {
	if !slices.Contains(enginetest.Engines(), "xla") {
		t.Skip("needs engine xla (MCPRL_TEST_ENGINES)")
	}
	lora := LoRAConfig{R: 4, Alpha: 8, TargetModules: []string{"all-linear"}, TrainableTokenIndices: []int{3, 40}}
	build := func() *Model {
		m, err := New(engineBackend(t, EngineXLA), tinyTestConfig(), 7)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.AddLoRA(lora, 5); err != nil {
			t.Fatal(err)
		}
		return m
	}
	src, ref := build(), build()
	if err := ref.SetBF16(true); err != nil {
		t.Fatal(err)
	}
	r, err := NewReplica(src, engineBackend(t, EngineXLA), true)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Model.BF16() || src.BF16() {
		t.Fatalf("copy bf16 %v, source bf16 %v", r.Model.BF16(), src.BF16())
	}
	dtypeOf := func(m *Model, scope, name string) dtypes.DType {
		v := m.Ctx.GetVariableByScopeAndName(scope, name)
		if v == nil {
			t.Fatalf("no variable %s/%s", scope, name)
		}
		return v.Shape().DType
	}
	if d := dtypeOf(r.Model, "/model/embed_tokens", "weight"); d != dtypes.BFloat16 {
		t.Errorf("the copy's embedding is %s", d)
	}
	if d := dtypeOf(r.Model, "/model/embed_tokens/token_adapter", "trainable_tokens_delta"); d != dtypes.Float32 {
		t.Errorf("the copy's token rows are %s", d)
	}
	same := func(when string) {
		t.Helper()
		tokens, mask := [][]int32{{5, 9, 13, 2, 8, 40, 3}}, [][]int32{{1, 1, 1, 1, 1, 1, 1}}
		_, want, err := ref.Forward(tokens, mask)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := r.Model.Forward(tokens, mask)
		if err != nil {
			t.Fatal(err)
		}
		w, g := tensors.MustCopyFlatData[float32](want), tensors.MustCopyFlatData[float32](got)
		if !slices.Equal(g, w) {
			t.Errorf("%s: the copy's log-probs %v, the bfloat16 model's %v", when, g, w)
		}
	}
	same("before training")
	perturbTrainable(t, src, 0.3, 9)
	perturbTrainable(t, ref, 0.3, 9)
	if err := r.Refresh(); err != nil {
		t.Fatal(err)
	}
	same("after Refresh")

	// Without an adapter the copy rounds the trained weights at each refresh.
	full := newTestModel(t, 3)
	fr, err := NewReplica(full, engineBackend(t, EngineXLA), true)
	if err != nil {
		t.Fatal(err)
	}
	perturbTrainable(t, full, 0.05, 4)
	if err := fr.Refresh(); err != nil {
		t.Fatal(err)
	}
	for _, p := range full.Config.params() {
		a, _, err := full.Tensor(p.name)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := fr.Model.Tensor(p.name)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range toBF16(a) {
			if v.Float32() != b[i] {
				t.Fatalf("%s[%d]: copy %v, the source's %v rounded to bfloat16 %v", p.name, i, b[i], a[i], v.Float32())
			}
		}
	}
	if _, err := NewReplica(full, engineBackend(t, EngineSimpleGo), true); !errors.Is(err, ErrBF16SimpleGo) {
		t.Errorf("a bfloat16 copy on simplego: %v", err)
	}
}
