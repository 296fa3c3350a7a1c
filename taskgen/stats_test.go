package taskgen

import (
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/task"
)

// Count counts tasks per category, the edge cases, and the goldens of more
// than one call; String lists every category in Categories' order.
func TestCount(t *testing.T) {
	call := chat.Message{Role: "assistant", ToolCalls: []chat.Call{{Name: "query_database"}}}
	tasks := []task.Task{
		{Category: "count", Golden: []chat.Message{call, {Role: "assistant", Content: "7"}}},
		{Category: "count", Golden: []chat.Message{call, call, {Role: "assistant", Content: "7"}}},
		{Category: EdgeCases[0]},
	}
	s := Count(tasks)
	if s.PerCategory["count"] != 2 || s.EdgeCases != 1 || s.Inspecting != 1 {
		t.Errorf("%+v", s)
	}
	str := s.String()
	if !strings.HasPrefix(str, " "+Categories[0]+" ") || !strings.Contains(str, " count 2") || !strings.Contains(str, " "+EdgeCases[0]+" 1") ||
		!strings.HasSuffix(str, "; 1 edge cases without a golden trajectory; 1 goldens look before they query") {
		t.Errorf("%q", str)
	}
}
