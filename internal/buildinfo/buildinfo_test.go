package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "(devel) go1.x linux/amd64"},
		{"go install of a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 go1.x linux/amd64"},
		{"a checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-01-02T03:04:05Z", "vcs.modified", "false")},
			"(devel) commit 0123456789ab 2026-01-02T03:04:05Z go1.x linux/amd64"},
		{"a modified checkout", &debug.BuildInfo{Settings: vcs("vcs.revision", "abc", "vcs.modified", "true")},
			"(devel) commit abc+modified go1.x linux/amd64"},
	} {
		if got := Describe(c.info, "go1.x", "linux/amd64"); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if s := String(); !strings.HasSuffix(s, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("String() = %q, want it to end with the Go version and platform", s)
	}
}
