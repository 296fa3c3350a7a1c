package model

// The rounding tolerances, for the package's external tests.
var (
	ForwardTol = forwardTol
	DotTol     = dotTol
)

// ImportOptions and ImportGGUF are package gguf/convert's, which imports model: this package's own tests cannot
// import it, so its external tests set ImportGGUF (import_test.go) for the internal ones, which build their tiny
// models from the GGUF files of testdata.
type ImportOptions struct {
	ChatTemplate string
	AddTokens    []string
}

var ImportGGUF func(path, dir string, opts ImportOptions) (*Config, error)
