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

// FirstTools gives the tools of the factory first by fixture name, nil for none.
func TestFirstTools(t *testing.T) {
	a, b := &Factory{tools: []*mcp.Tool{{Name: "run_linter"}}}, &Factory{tools: []*mcp.Tool{{Name: "query_database"}}}
	if got := ToolNames(FirstTools(map[string]*Factory{"orders": a, "customers": b})); !slices.Equal(got, []string{"query_database"}) {
		t.Errorf("FirstTools: %v, want customers' tools", got)
	}
	if got := FirstTools(nil); got != nil {
		t.Errorf("no factories: %v", got)
	}
}
