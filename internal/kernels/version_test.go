package kernels

import (
	"os"
	"regexp"
	"testing"
)

// TestPinnedGoMLX fails loudly when the GoMLX this module builds with is not the one whose internals the kernels
// know: go.mod must pin PinnedGoMLX, simplego's node and buffer fields must lie where newLayout finds them, and the
// DotGeneral node must carry its axes where dotAxes reads them. On a GoMLX upgrade, check every internal this
// package reaches (kernels.go's linknames and layout, grad.go's dotAxes, dot.go's readParams) and then move
// PinnedGoMLX.
func TestPinnedGoMLX(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/gomlx/gomlx (\S+)`).FindSubmatch(mod)
	if m == nil || string(m[1]) != PinnedGoMLX {
		t.Fatalf("go.mod requires GoMLX %q but the kernels know %s's internals: check them against the new version, then update PinnedGoMLX", m, PinnedGoMLX)
	}
	if _, err := newLayout(); err != nil {
		t.Fatalf("simplego's internals moved: %v", err)
	}
	if err := InstallDotGradient(newBackend(t)); err != nil {
		t.Fatalf("the DotGeneral gradient cannot be installed: %v", err)
	}
	if got := DotGradientEngine(); got != "two DotGenerals (internal/kernels)" {
		t.Errorf("DotGradientEngine() = %q", got)
	}
}

// TestOtherGoMLXFallsBack: any GoMLX but the pinned one (or an unversioned replacement) is refused with a reason,
// which Install and InstallDotGradient turn into GoMLX's own code running.
func TestOtherGoMLXFallsBack(t *testing.T) {
	for _, v := range []string{"v0.26.1", "v0.27.0", "(replaced by ../gomlx)"} {
		if err := versionError(v); err == nil {
			t.Errorf("GoMLX %s accepted", v)
		}
	}
	for _, v := range []string{PinnedGoMLX, ""} {
		if err := versionError(v); err != nil {
			t.Errorf("GoMLX %q refused: %v", v, err)
		}
	}
}
