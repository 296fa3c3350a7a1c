package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/gomlx/backends"

	"github.com/mcprl/mcprl/internal/kernels"
)

// Engine is the setting that picks the GoMLX backend a model runs on: the key `engine` of every config and the
// flag --engine of every command that runs a model. The choice lives here, and a command passes it explicitly
// (OpenEngine); the model itself only sees the backend it was given.
//
//   - EngineSimpleGo: GoMLX's pure-Go simplego backend with internal/kernels (OpenBLAS matmuls where installed).
//     Nothing to download; the fallback.
//   - EngineXLA: GoMLX's XLA backend (github.com/gomlx/go-xla), which compiles and fuses whole graphs, through a
//     PJRT plugin loaded at run time: XLA's CPU plugin (see CPUPluginPath; scripts/install-xla.sh installs it), or
//     the plugin $GOMLX_BACKEND names when it names one (GOMLX_BACKEND=xla:cuda: a CUDA plugin GoMLX finds).
//     "xla:NAME" names a plugin directly (a name GoMLX's plugin search finds, e.g. cuda, or a .so path).
//     It fails when no plugin loads.
//   - EngineAuto (the default, also ""): $GOMLX_BACKEND when set ("go" or "simplego" for simplego, "xla:..."
//     for XLA), else XLA on the CPU plugin where it loads, else simplego; EngineBackend.Fallback says why XLA
//     is not in use.
//
// Nothing is downloaded at run time: GoMLX's plugin auto-install is turned off.
type Engine string

const (
	EngineAuto     Engine = "auto"
	EngineXLA      Engine = "xla"
	EngineSimpleGo Engine = "simplego"
)

// Engines lists the settings, for help texts and errors.
const Engines = "auto, xla (or xla:PLUGIN), simplego"

// ParseEngine reads an engine setting; "" is EngineAuto.
func ParseEngine(s string) (Engine, error) {
	switch e := Engine(strings.TrimSpace(s)); {
	case e == "":
		return EngineAuto, nil
	case e == EngineAuto, e == EngineXLA, e == EngineSimpleGo:
		return e, nil
	case strings.HasPrefix(string(e), "xla:") && len(e) > len("xla:"):
		return e, nil
	}
	return "", fmt.Errorf("engine %q: want one of %s", s, Engines)
}

// plugin is the PJRT plugin an XLA setting names ("" for the default CPU plugin).
func (e Engine) plugin() string {
	if p, ok := strings.CutPrefix(string(e), "xla:"); ok && p != "cpu" {
		return p
	}
	return ""
}

// EngineBackend is the backend an Engine setting opened, and what it is.
type EngineBackend struct {
	// Backend is what the model runs on (pass it to Load or New).
	Backend backends.Backend
	// Engine is what runs: EngineXLA or EngineSimpleGo. Setting is what was asked.
	Engine, Setting Engine
	// Plugin describes XLA's PJRT plugin (its name, path and PJRT API version).
	Plugin string
	// Fallback is why an auto setting runs on simplego: no XLA plugin found, or it failed to load.
	Fallback error
	// FromEnv is $GOMLX_BACKEND when it decided what auto (or xla) runs.
	FromEnv string
}

// IsXLA reports whether b runs on XLA.
func (e *EngineBackend) IsXLA() bool { return e.Engine == EngineXLA }

// String is the engine line commands print when they start: what runs the model, and on simplego what runs its
// matmuls and elementwise ops; both name the DotGeneral gradient.
func (e *EngineBackend) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine: %s", e.Engine)
	switch {
	case e.IsXLA():
		fmt.Fprintf(&b, " (%s", e.Plugin)
	case e.Fallback != nil:
		fmt.Fprintf(&b, " (XLA not in use: %v; bash scripts/install-xla.sh installs its CPU plugin", e.Fallback)
	default:
		fmt.Fprintf(&b, " (pure Go")
	}
	if e.Setting != e.Engine {
		fmt.Fprintf(&b, "; engine setting %s", e.Setting)
	}
	if e.FromEnv != "" {
		fmt.Fprintf(&b, " from $%s=%s", backends.ConfigEnvVar, e.FromEnv)
	}
	b.WriteString(")")
	if !e.IsXLA() {
		fmt.Fprintf(&b, "; matmul: %s; elementwise: %s", MatmulEngine(), ElementwiseEngine())
	}
	fmt.Fprintf(&b, "; DotGeneral gradient: %s", GradientEngine())
	return b.String()
}

// OpenEngine opens the backend an engine setting names (see Engine). An explicit xla fails when no plugin loads;
// auto then falls back to simplego and records why.
func OpenEngine(setting Engine) (*EngineBackend, error) {
	setting, err := ParseEngine(string(setting))
	if err != nil {
		return nil, err
	}
	want, env := setting, os.Getenv(backends.ConfigEnvVar)
	eb := &EngineBackend{Setting: setting}
	if want == EngineAuto && env != "" {
		if want, err = engineOfGoMLXBackend(env); err != nil {
			return nil, err
		}
		eb.FromEnv = env
	} else if want == EngineXLA && env != "" {
		// GOMLX_BACKEND=xla:cuda makes `engine: xla` run on that plugin.
		if e, err := engineOfGoMLXBackend(env); err == nil && e != EngineSimpleGo {
			want, eb.FromEnv = e, env
		}
	}
	if want != EngineSimpleGo {
		eb.Backend, eb.Plugin, err = openXLA(want.plugin())
		if err == nil {
			eb.Engine = EngineXLA
			kernels.InstallDotGradient(eb.Backend) //nolint:errcheck // reported by GradientEngine
			return eb, nil
		}
		if want != EngineAuto {
			return nil, fmt.Errorf("engine %s: %w", want, err)
		}
		eb.Fallback = err
	}
	if eb.Backend, err = newSimpleGo(""); err != nil {
		return nil, err
	}
	eb.Engine = EngineSimpleGo
	kernels.InstallDotGradient(eb.Backend) //nolint:errcheck // reported by GradientEngine
	return eb, nil
}

// engineOfGoMLXBackend maps GoMLX's $GOMLX_BACKEND ("go", "simplego", "xla:PLUGIN", "stablehlo:...") to a setting.
func engineOfGoMLXBackend(v string) (Engine, error) {
	name, cfg, _ := strings.Cut(v, ":")
	switch name {
	case "go", "simplego":
		return EngineSimpleGo, nil
	case "xla", "stablehlo", "hlo", "shlo", "pjrt":
		if cfg == "" {
			return EngineXLA, nil
		}
		return Engine("xla:" + cfg), nil
	}
	return "", fmt.Errorf("$%s=%q: mcprl runs on go (simplego) or xla[:PLUGIN]", backends.ConfigEnvVar, v)
}

// CPUPluginVersion is the XLA CPU PJRT plugin scripts/install-xla.sh installs: PyPI's lammps-jax-pjrt-cpu of
// this version (XLA of JAX 0.11.2).
const CPUPluginVersion = "0.11.2"

// PluginEnvVar names an XLA CPU PJRT plugin file (or a folder holding pjrt_c_api_cpu_plugin.so) to use instead
// of the one scripts/install-xla.sh installed.
const PluginEnvVar = "MCPRL_PJRT_PLUGIN"

const cpuPluginFile = "pjrt_c_api_cpu_plugin.so"

// CPUPluginPath finds XLA's CPU PJRT plugin: $MCPRL_PJRT_PLUGIN when set; else where scripts/install-xla.sh puts
// it, ${XDG_CACHE_HOME:-~/.cache}/mcprl/pjrt-cpu-0.11.2/pjrt_c_api_cpu_plugin.so; else a "cpu" plugin in GoMLX's
// own search path ($PJRT_PLUGIN_LIBRARY_PATH, ~/.local/lib/go-xla, /usr/local/lib/go-xla, the library path).
func CPUPluginPath() (string, error) {
	if p := os.Getenv(PluginEnvVar); p != "" {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, cpuPluginFile)
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s: %w", PluginEnvVar, err)
		}
		return filepath.Abs(p)
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	var tried string
	if cache != "" {
		p := filepath.Join(cache, "mcprl", "pjrt-cpu-"+CPUPluginVersion, cpuPluginFile)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = p
	}
	if p, ok := searchXLAPlugin("cpu"); ok {
		return p, nil
	}
	if !xlaBuilt {
		return "", errNoXLA
	}
	return "", fmt.Errorf("no XLA CPU plugin (not at %s, nor in GoMLX's plugin paths)", tried)
}

var errNoXLA = errors.New("this binary was built without the XLA backend (CGO_ENABLED=0 or -tags noxla)")

// openXLA opens GoMLX's XLA backend on a PJRT plugin: "" is the CPU plugin CPUPluginPath finds; otherwise a name
// GoMLX's plugin search finds (e.g. "cuda") or a path. It returns the backend and a description of the plugin.
func openXLA(plugin string) (backends.Backend, string, error) {
	if !xlaBuilt {
		return nil, "", errNoXLA
	}
	if plugin == "" {
		p, err := CPUPluginPath()
		if err != nil {
			return nil, "", err
		}
		plugin = p
	}
	return newXLA(plugin)
}
