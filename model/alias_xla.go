//go:build cgo && !noxla

package model

import (
	"reflect"
	"unsafe"

	"github.com/gomlx/go-xla/pkg/stablehlo"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.
)

// aliasOutputs declares, on a graph being built for GoMLX's XLA backend, that parameter inputs[i] may share its
// buffer with the graph's output first+i (XLA's input/output alias, StableHLO's tf.aliasing_output argument
// attribute), so that XLA updates a donated input in place: the KV cache a decoding step scatters its new keys and
// values into. GoMLX v0.26 declares no alias for a donated input, so XLA copied each cache into a new buffer on
// every step (32 KiB per cache slot of the window for the quick example's batch of 32: 24 MiB a step at 768 slots)
// and the process paid the copy and the first touch of the new pages. The values computed are the same.
//
// GoMLX has no API for it: the parameter's StableHLO value is reached through two unexported fields (graph.Node's
// outputOps, the XLA backend's Node.value), each looked up by name and type first. Where either is missing (another
// GoMLX) or a node is not an XLA parameter (simplego), nothing is declared and the graph stays as it was.
func aliasOutputs(inputs []*Node, first int) {
	for i, n := range inputs {
		v := parameterValue(n)
		if v == nil {
			return
		}
		if v.Attributes == nil {
			v.Attributes = map[string]any{}
		}
		v.Attributes["tf.aliasing_output"] = int32(first + i)
	}
}

// parameterValue is the StableHLO value of the graph parameter n on the XLA backend, nil when n is not one or the
// fields it is reached through are not what they were in GoMLX v0.26.
func parameterValue(n *Node) *stablehlo.Value {
	if n.Type() != NodeTypeParameter {
		return nil
	}
	f := reflect.ValueOf(n).Elem().FieldByName("outputOps")
	if !f.IsValid() || f.Type() != reflect.TypeFor[[]backends.Op]() {
		return nil
	}
	ops := *(*[]backends.Op)(unsafe.Pointer(f.UnsafeAddr()))
	if len(ops) != 1 {
		return nil
	}
	op, ok := ops[0].(*xla.Node)
	if !ok || op == nil {
		return nil
	}
	f = reflect.ValueOf(op).Elem().FieldByName("value")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*stablehlo.Value]() {
		return nil
	}
	return *(**stablehlo.Value)(unsafe.Pointer(f.UnsafeAddr()))
}
