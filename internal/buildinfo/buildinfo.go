package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// String describes the running binary's build (see Describe).
func String() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return Describe(info, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

// Describe is the build info's module version (a tag for `go install
// ...@vX`, "(devel)" for a local build or without build info), the commit
// and its time when the binary was built from a checkout (with
// "+modified" for uncommitted changes), then goVersion and platform.
func Describe(info *debug.BuildInfo, goVersion, platform string) string {
	parts := []string{"(devel)"}
	if info != nil && info.Main.Version != "" {
		parts[0] = info.Main.Version
	}
	if info != nil {
		var rev, at string
		modified := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if modified {
				rev += "+modified"
			}
			parts = append(parts, "commit "+rev)
		}
		if at != "" {
			parts = append(parts, at)
		}
	}
	parts = append(parts, goVersion, platform)
	return strings.Join(parts, " ")
}
