package kernels

import (
	"fmt"
	"runtime/debug"
)

// PinnedGoMLX is the GoMLX version whose internals this package reaches into (go.mod pins it): simplego's
// executor table and node and buffer layouts, and the DotGeneral node's axes. On any other version Install and
// InstallDotGradient leave GoMLX's own code in place.
const PinnedGoMLX = "v0.26.0"

const gomlxModule = "github.com/gomlx/gomlx"

// linkedGoMLX returns the version of GoMLX linked into this binary, as its build info records it (a replaced
// module's replacement), or "" when the build info does not list it (test binaries).
func linkedGoMLX() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path != gomlxModule {
			continue
		}
		if d.Replace != nil {
			if d.Replace.Version == "" {
				return "(replaced by " + d.Replace.Path + ")"
			}
			return d.Replace.Version
		}
		return d.Version
	}
	return ""
}

// checkVersion fails when the linked GoMLX is known not to be PinnedGoMLX. Where the build info does not say
// (test binaries), the layout checks alone guard the internals.
func checkVersion() error { return versionError(linkedGoMLX()) }

func versionError(linked string) error {
	if linked != "" && linked != PinnedGoMLX {
		return fmt.Errorf("GoMLX %s is linked, not %s whose internals mcprl's kernels know", linked, PinnedGoMLX)
	}
	return nil
}
