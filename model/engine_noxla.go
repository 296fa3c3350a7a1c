//go:build !cgo || noxla

package model

import "github.com/gomlx/gomlx/backends"

// xlaBuilt says whether this binary carries GoMLX's XLA backend: not without cgo, nor with -tags noxla.
const xlaBuilt = false

func newXLA(string) (backends.Backend, string, error) { return nil, "", errNoXLA }

func searchXLAPlugin(string) (string, bool) { return "", false }
