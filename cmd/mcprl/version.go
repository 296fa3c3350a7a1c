package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version describes the build: the module version (a tag for `go install
// ...@vX`, "(devel)" for a local build), the commit and its time when the
// binary was built from a checkout (with "+modified" for uncommitted
// changes), and the Go version.
func version() string {
	parts := []string{"(devel)"}
	info, ok := debug.ReadBuildInfo()
	if ok && info.Main.Version != "" {
		parts[0] = info.Main.Version
	}
	if ok {
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
	parts = append(parts, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	return strings.Join(parts, " ")
}
