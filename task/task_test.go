package task

import "testing"

// SharedSystemPrompt is the one system prompt all tasks have, else "".
func TestSharedSystemPrompt(t *testing.T) {
	for _, c := range []struct {
		tasks []Task
		want  string
	}{
		{nil, ""},
		{[]Task{{SystemPrompt: "a"}, {SystemPrompt: "a"}}, "a"},
		{[]Task{{SystemPrompt: "a"}, {SystemPrompt: "b"}}, ""},
		{[]Task{{SystemPrompt: "a"}, {}}, ""},
		{[]Task{{}, {}}, ""},
	} {
		if got := SharedSystemPrompt(c.tasks); got != c.want {
			t.Errorf("%+v: %q, want %q", c.tasks, got, c.want)
		}
	}
}
