package model_test

import (
	"github.com/mcprl/mcprl/gguf/convert"
	"github.com/mcprl/mcprl/model"
)

// The converter for the internal tests (export_test.go).
func init() {
	model.ImportGGUF = func(path, dir string, opts model.ImportOptions) (*model.Config, error) {
		return convert.ImportGGUF(path, dir, convert.ImportOptions(opts))
	}
}
