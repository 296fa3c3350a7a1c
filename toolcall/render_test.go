package toolcall

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// seedSystemPrompt is the system_prompt of the user's example task (seed file).
const seedSystemPrompt = "You are a Model Context Protocol reasoning agent. You have access to the following MCP tools:\n- name: query_database\n  inputSchema: {\"sql\": {\"type\": \"string\"}}\n- name: run_linter\n  inputSchema: {\"path\": {\"type\": \"string\"}}"

func TestRenderCatalogSeedForm(t *testing.T) {
	tools := []*mcp.Tool{
		{Name: "query_database", InputSchema: json.RawMessage(`{"type":"object","properties":{"sql":{"type":"string"}},"required":["sql"]}`)},
		{Name: "run_linter", InputSchema: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}}}`)},
	}
	if got := RenderCatalog(tools); got != seedSystemPrompt {
		t.Fatalf("RenderCatalog =\n%s\nwant\n%s", got, seedSystemPrompt)
	}
}

func TestRenderCatalogPythonDumps(t *testing.T) {
	tools := []*mcp.Tool{{Name: "t", InputSchema: json.RawMessage(`{"properties":{"z":{"enum":[1,2.5,true,null],"description":"café \u007f <\"q\">"},"a":{}}}`)}}
	// python3 -c 'import json; print(json.dumps({"z":{"enum":[1,2.5,True,None],"description":"café \x7f <\"q\">"},"a":{}}))'
	want := CatalogPreamble + "\n- name: t\n  inputSchema: " + `{"z": {"enum": [1, 2.5, true, null], "description": "caf\u00e9 \u007f <\"q\">"}, "a": {}}`
	if got := RenderCatalog(tools); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

type queryArgs struct {
	SQL string `json:"sql" jsonschema:"the SQL query to run"`
}

// TestCatalogFromLiveServer lists the tools of a real MCP server over the
// SDK's in-memory transport and renders them both ways.
func TestCatalogFromLiveServer(t *testing.T) {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "query_database", Description: "Run SQL"},
		func(ctx context.Context, req *mcp.CallToolRequest, in queryArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := CatalogPreamble + "\n- name: query_database\n  inputSchema: {\"sql\": {\"description\": \"the SQL query to run\", \"type\": \"string\"}}"
	if got := RenderCatalog(res.Tools); got != want {
		t.Errorf("RenderCatalog = %q\nwant %q", got, want)
	}
	fs := FunctionSchemas(res.Tools)
	if len(fs) != 1 {
		t.Fatalf("FunctionSchemas: %d", len(fs))
	}
	var f struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(fs[0], &f); err != nil {
		t.Fatalf("%s: %v", fs[0], err)
	}
	if f.Type != "function" || f.Function.Name != "query_database" || f.Function.Description != "Run SQL" || f.Function.Parameters["type"] != "object" {
		t.Errorf("schema = %s", fs[0])
	}
}

func TestFunctionSchemasKeyOrder(t *testing.T) {
	tools := []*mcp.Tool{{Name: "q", Description: "d <&>", InputSchema: json.RawMessage(`{"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}, "required": ["z"]}`)}}
	got := string(FunctionSchemas(tools)[0])
	want := `{"type":"function","function":{"name":"q","description":"d <&>","parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}},"required":["z"]}}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
