//go:build !cgo || noxla

package model

import . "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.

// aliasOutputs declares nothing in a binary without XLA (see alias_xla.go).
func aliasOutputs([]*Node, int) {}
