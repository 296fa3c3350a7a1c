package sandbox

import (
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolNames keeps the tools' order; none gives an empty list.
func TestToolNames(t *testing.T) {
	if got := ToolNames([]*mcp.Tool{{Name: "run_linter"}, {Name: "query_database"}}); !slices.Equal(got, []string{"run_linter", "query_database"}) {
		t.Errorf("ToolNames: %v", got)
	}
	if got := ToolNames(nil); got == nil || len(got) != 0 {
		t.Errorf("no tools: %#v", got)
	}
}
