//go:build cgo && !noxla

package model

import (
	"slices"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/internal/enginetest"
)

// TestAliasOutputs checks, on each engine, that aliasOutputs declares the alias on XLA (it reaches GoMLX's
// internals: after a GoMLX upgrade that moved them it would declare nothing and the decoding steps would copy
// their caches again, silently) and nothing elsewhere, and that a graph updating a donated, aliased input in
// place returns the right values call after call.
func TestAliasOutputs(t *testing.T) {
	enginetest.Run(t, func(t *testing.T, engine string) {
		backend := engineBackend(t, Engine(engine))
		var declared []any
		exec, err := NewExec(backend, func(in []*Node) []*Node {
			aliasOutputs(in[:1], 1)
			if v := parameterValue(in[0]); v != nil {
				declared = append(declared, v.Attributes["tf.aliasing_output"])
			}
			return []*Node{ReduceAllSum(in[0]), Add(in[0], in[1])}
		})
		if err != nil {
			t.Fatal(err)
		}
		x := tensors.FromFlatDataAndDimensions([]float32{1, 2, 3}, 3)
		d := tensors.FromFlatDataAndDimensions([]float32{10, 20, 30}, 3)
		for call := 1; call <= 3; call++ {
			donated, err := DonateTensorBuffer(x, backend, 0)
			if err != nil {
				t.Fatal(err)
			}
			outs, err := exec.Exec(donated, d)
			if err != nil {
				t.Fatalf("call %d: %v", call, err)
			}
			want := []float32{1 + 10*float32(call), 2 + 20*float32(call), 3 + 30*float32(call)}
			if got := tensors.MustCopyFlatData[float32](outs[1]); !slices.Equal(got, want) {
				t.Fatalf("call %d: updated input %v, want %v", call, got, want)
			}
			if got, want := tensors.ToScalar[float32](outs[0]), float32(6+60*(call-1)); got != want {
				t.Fatalf("call %d: sum of the input %v, want %v", call, got, want)
			}
			x = outs[1]
		}
		want := []any(nil)
		if engine == "xla" {
			want = []any{int32(1)}
		}
		if !slices.Equal(declared, want) {
			t.Errorf("aliases declared %v, want %v", declared, want)
		}
	})
}
