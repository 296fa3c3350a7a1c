package jinja_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcprl/mcprl/internal/jinja"
)

// render compiles src and renders it within timeout, returning what it
// allocated too.
func render(t *testing.T, src string, timeout time.Duration) (string, error, uint64) {
	t.Helper()
	tmpl, err := jinja.Compile(src)
	if err != nil {
		t.Fatalf("compile %q: %v", src, err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := tmpl.RenderValuesWithin(map[string]jinja.Value{}, timeout)
	runtime.ReadMemStats(&after)
	return out, err, after.TotalAlloc - before.TotalAlloc
}

// TestLimits: templates that would exhaust memory or time, or crash the
// process (a stack overflow is fatal in Go), stop with an error naming the
// limit, allocating at most 512 MB.
func TestLimits(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"range", `{% for x in range(10000000000) %}{{ x }}{% endfor %}`, "MAX_RANGE"},
		{"negative range", `{% for x in range(0, -10000000000, -1) %}{% endfor %}`, "MAX_RANGE"},
		{"nested loops", `{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}`, "longer than"},
		{"output", `{% for a in range(100000) %}{% for b in range(100000) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}`, "output of more than"},
		{"doubling", `{% set ns = namespace(s="x") %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}`, "a string of more than"},
		{"repeat", `{{ "xx" * 10000000000 }}`, "repeated string"},
		{"join", `{% set ns = namespace(s="x" * 20000000) %}{{ [ns.s, ns.s, ns.s]|join("") }}`, "joined string"},
		{"replace", `{{ ("x" * 1000)|replace("x", "y" * 1000000) }}`, "replaced string"},
		{"list", `{% set l = [] %}{% for a in range(100000) %}{% for b in range(100) %}{{ l.append(b) }}{% endfor %}{% endfor %}`, "a list of more than"},
		{"recursion", `{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`, "nested more than"},
		{"self-holding list", `{% set l = [] %}{{ l.append(l) }}{{ l }}`, "nested more than"},
		{"self-holding tojson", `{% set l = [] %}{{ l.append(l) }}{{ l|tojson(indent=2) }}`, "nested more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The limit met must be the one named: the render's own time limit
			// (a minute) would end it with another error. No wall-clock bound
			// here: on a loaded machine a second is no measure of anything.
			timeout := time.Minute
			if c.want == "longer than" {
				timeout = 300 * time.Millisecond
			}
			_, err, alloc := render(t, c.src, timeout)
			var le *jinja.LimitError
			if err == nil || !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want a LimitError with %q", err, c.want)
			}
			if alloc > 512<<20 {
				t.Errorf("allocated %d MB", alloc>>20)
			}
		})
	}
}

// TestWithinLimits: what the limits changed on ordinary input is Python's
// behaviour, not an error.
func TestWithinLimits(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{{ "ab" * -1 }}|{{ "ab" * 0 }}|{{ "ab" * 2 }}`, "||abab"},
		{`{{ [1, 2, 3, 4, 5][0:1000000000000000000:2] }}`, "[1, 3, 5]"},
		{`{{ [1, 2, 3, 4, 5][1000000000000000000:-1000000000000000000:-2] }}`, "[5, 3, 1]"},
		{`{{ "abcde"[-1000000000000000000:1000000000000000000:2] }}`, "ace"},
		{`{{ "a\nb"|indent(-5) }}`, "a\nb"},
		{`{% for x in range(100000) %}{% endfor %}{{ range(3)|list }}`, "[0, 1, 2]"},
		{`{% set l = [[1], [2]] %}{{ l }}`, "[[1], [2]]"},
	} {
		out, err, _ := render(t, c.src, time.Minute)
		if err != nil || out != c.want {
			t.Errorf("%s: %q, %v; want %q", c.src, out, err, c.want)
		}
	}
}
