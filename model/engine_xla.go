//go:build cgo && !noxla

package model

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla"
)

// xlaBuilt says whether this binary carries GoMLX's XLA backend (github.com/gomlx/go-xla, which needs cgo to call
// the PJRT plugin it loads with dlopen).
const xlaBuilt = true

// newXLA opens GoMLX's XLA backend on a plugin (a path or a name GoMLX's search finds), with GoMLX's plugin
// auto-install off: nothing downloads at run time (the switch is GoMLX's, per process).
func newXLA(plugin string) (backends.Backend, string, error) {
	xla.EnableAutoInstall(false)
	config := plugin
	if filepath.IsAbs(plugin) && strings.HasSuffix(plugin, "/"+cpuPluginFile) {
		// GoMLX shares host and device buffers (no copies) for a plugin named "cpu", not for one given by path.
		config += ",shared_buffers"
	}
	b, err := xla.NewWithOptions(config, nil)
	if err != nil {
		return nil, "", fmt.Errorf("XLA plugin %s: %w", plugin, err)
	}
	desc := b.Description()
	if _, rest, ok := strings.Cut(desc, " - "); ok {
		desc = rest
	}
	return b, desc, nil
}

// searchXLAPlugin finds a PJRT plugin by name in GoMLX's plugin search path.
func searchXLAPlugin(name string) (string, bool) {
	p, ok := pjrt.AvailablePlugins()[name]
	return p, ok
}
