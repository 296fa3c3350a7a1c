package sandbox

import "github.com/modelcontextprotocol/go-sdk/mcp"

// ToolNames returns the names of tools, in their order: the catalog an
// agent offered them was shown.
func ToolNames(tools []*mcp.Tool) []string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}
