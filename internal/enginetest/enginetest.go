// Package enginetest runs tests on each engine the model runs on (model.Engine): the model, GRPO, SFT and command
// tests run a representative subset on XLA as well as everything on simplego.
//
// $MCPRL_TEST_ENGINES (comma-separated: simplego, xla) lists the engines; unset, it is "simplego,xla", and an
// XLA whose plugin is not installed (scripts/install-xla.sh) skips its tests. An engine the variable lists
// explicitly must open: scripts/test-setup.sh installs the plugin and sets MCPRL_TEST_ENGINES=simplego,xla, so
// CI fails rather than skips without it.
//
// The package does not import the model (whose own tests use it); callers open an engine with model.OpenEngine
// and hand a failure to Unavailable.
package enginetest

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// EnvVar lists the engines tests run on.
const EnvVar = "MCPRL_TEST_ENGINES"

// Engines lists the engines tests run on, simplego first: $MCPRL_TEST_ENGINES, else simplego and xla.
func Engines() []string {
	v := os.Getenv(EnvVar)
	if v == "" {
		return []string{"simplego", "xla"}
	}
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "simplego":
			return -1
		case b == "simplego":
			return 1
		}
		return 0
	})
	return out
}

// Listed reports whether $MCPRL_TEST_ENGINES names engine explicitly.
func Listed(engine string) bool {
	return os.Getenv(EnvVar) != "" && slices.Contains(Engines(), engine)
}

// Run runs f as a subtest per engine of Engines, named after it.
func Run(t *testing.T, f func(t *testing.T, engine string)) {
	t.Helper()
	for _, e := range Engines() {
		t.Run(e, func(t *testing.T) { f(t, e) })
	}
}

// Others are Engines less simplego: the engines a package's subset runs on beside its ordinary tests.
func Others() []string {
	return slices.DeleteFunc(Engines(), func(e string) bool { return e == "simplego" })
}

// Unavailable ends a test whose engine did not open: it fails when $MCPRL_TEST_ENGINES lists the engine, and
// skips otherwise (no plugin installed here).
func Unavailable(t testing.TB, engine string, err error) {
	t.Helper()
	if Listed(engine) {
		t.Fatalf("engine %s (listed in $%s): %v", engine, EnvVar, err)
	}
	t.Skipf("engine %s not available (%v); bash scripts/install-xla.sh installs its CPU plugin", engine, err)
}
