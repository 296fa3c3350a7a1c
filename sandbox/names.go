package sandbox

import (
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolNames returns the names of tools, in their order: the catalog an
// agent offered them was shown.
func ToolNames(tools []*mcp.Tool) []string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

// FirstTools returns the tools of the first of factories by fixture name (nil when there is none): one fixture's
// tools stand for all where a request must carry some, as the probe of a served model does.
func FirstTools(factories map[string]*Factory) []*mcp.Tool {
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil
	}
	return factories[names[0]].Tools()
}
