package tokenizer

import (
	"strings"
	"testing"
	"time"

	"github.com/mcprl/mcprl/chat"
)

// TestTemplateBounded: issue 29's chat template, range(10000000000), which
// imported and then killed generate --tasks in RenderVars, is refused as
// Jinja2's sandbox refuses it; a template that loops for long stops at the
// time limit, and one that encodes a list holding itself stops too.
func TestTemplateBounded(t *testing.T) {
	old := renderTimeout
	renderTimeout = 300 * time.Millisecond
	defer func() { renderTimeout = old }()
	msgs := []chat.Message{{Role: "user", Content: "hi"}}
	for _, c := range []struct{ src, want string }{
		{`{% for x in range(10000000000) %}{{ x }}{% endfor %}`, "MAX_RANGE"},
		{`{% for m in messages %}{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}{% endfor %}`, "longer than 300ms"},
		{`{% set l = [] %}{{ l.append(l) }}{{ l|tojson }}`, "nested more than"},
		{`{{ messages|tojson(indent=10000000000) }}`, "indent"},
	} {
		tp, err := ParseTemplate(c.src)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		_, err = tp.Render(msgs, nil, true)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "chat template: ") {
			t.Errorf("%s: %v, want an error with %q", c.src, err, c.want)
		}
		if d := time.Since(begin); d > 5*time.Second {
			t.Errorf("%s: %v", c.src, d)
		}
	}
}
