package task

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFixture(t *testing.T, root, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadExampleFixture(t *testing.T) {
	fx, err := LoadFixture(filepath.Join("..", "examples", "fixtures", "customers"))
	if err != nil {
		t.Fatal(err)
	}
	if fx.Name != "customers" || !filepath.IsAbs(fx.Dir) || !strings.Contains(fx.SchemaSQL, "CREATE TABLE customers") ||
		!strings.Contains(fx.DataSQL, "INSERT INTO customers") || filepath.Base(fx.WorkspaceDir) != "workspace" {
		t.Errorf("fixture: %+v", fx)
	}
	want := SandboxConfig{Tools: []string{"query_database", "run_linter"}, Limits: Limits{QueryTimeout: 2 * time.Second, MaxRows: 200, MaxBytes: 65536}}
	if !reflect.DeepEqual(fx.Config, want) {
		t.Errorf("config %+v, want %+v", fx.Config, want)
	}
	all, err := LoadFixtures(filepath.Join("..", "examples", "fixtures"))
	if err != nil || all["customers"] == nil {
		t.Fatalf("LoadFixtures: %v %v", all, err)
	}
}

func TestLoadFixtureDefaultsAndFull(t *testing.T) {
	root := t.TempDir()
	dir := writeFixture(t, root, "minimal", map[string]string{"schema.sql": "CREATE TABLE t (a INTEGER);"})
	fx, err := LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fx.DataSQL != "" || fx.WorkspaceDir != "" || !reflect.DeepEqual(fx.Config.Tools, DefaultTools) {
		t.Errorf("minimal fixture: %+v", fx)
	}
	dir = writeFixture(t, root, "full", map[string]string{
		"schema.sql":      "CREATE TABLE t (a INTEGER);",
		"data.sql":        "INSERT INTO t VALUES (1);",
		"workspace/a.sql": "SELECT a FROM t;",
		"sandbox.yaml": `tools: [query_database]
linters:
  - pattern: "*.py"
    command: [ruff, check]
    timeout: 5s
mcp_servers:
  - name: everything
    command: [npx, "@modelcontextprotocol/server-everything"]
    env: {DEBUG: "1"}
  - name: remote
    url: http://127.0.0.1:9000/mcp
limits: {query_timeout: 1500ms, max_rows: 10, max_bytes: 4096}
`,
	})
	fx, err = LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := SandboxConfig{
		Tools:   []string{"query_database"},
		Linters: []LinterSpec{{Pattern: "*.py", Command: []string{"ruff", "check"}, Timeout: 5 * time.Second}},
		MCPServers: []ServerSpec{
			{Name: "everything", Command: []string{"npx", "@modelcontextprotocol/server-everything"}, Env: map[string]string{"DEBUG": "1"}},
			{Name: "remote", URL: "http://127.0.0.1:9000/mcp"},
		},
		Limits: Limits{QueryTimeout: 1500 * time.Millisecond, MaxRows: 10, MaxBytes: 4096},
	}
	if !reflect.DeepEqual(fx.Config, want) {
		t.Errorf("config\n got %+v\nwant %+v", fx.Config, want)
	}
	all, err := LoadFixtures(root)
	if err != nil || len(all) != 2 || !reflect.DeepEqual(Names(all), []string{"full", "minimal"}) {
		t.Errorf("LoadFixtures: %v %v", Names(all), err)
	}
}

func TestLoadFixtureErrors(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		msg   string
	}{
		{"no schema", map[string]string{"data.sql": "x"}, "schema.sql is required"},
		{"empty schema", map[string]string{"schema.sql": "  \n"}, "schema.sql is empty"},
		{"workspace is a file", map[string]string{"schema.sql": "x", "workspace": "x"}, "workspace is not a directory"},
		{"unknown key", map[string]string{"schema.sql": "x", "sandbox.yaml": "tools: [query_database]\nlinter:\n  - pattern: x\n"}, "line 2: field linter not found"},
		{"unknown nested key", map[string]string{"schema.sql": "x", "sandbox.yaml": "limits:\n  query_timeout: 1s\n  max_row: 5\n"}, "line 3: field max_row not found"},
		{"wrong type", map[string]string{"schema.sql": "x", "sandbox.yaml": "tools: query_database\n"}, "line 1: cannot unmarshal"},
		{"bad duration", map[string]string{"schema.sql": "x", "sandbox.yaml": "limits:\n  query_timeout: soon\n"}, "line 2"},
		{"bad yaml", map[string]string{"schema.sql": "x", "sandbox.yaml": "tools: [a\n"}, "sandbox.yaml"},
		{"two documents", map[string]string{"schema.sql": "x", "sandbox.yaml": "tools: [a]\n---\ntools: [b]\n"}, "more than one YAML document"},
		{"duplicate tool", map[string]string{"schema.sql": "x", "sandbox.yaml": "tools: [a, a]\n"}, `tools[1]: "a" listed twice`},
		{"linter without command", map[string]string{"schema.sql": "x", "sandbox.yaml": "linters:\n  - pattern: '*.py'\n"}, "linters[0].command: missing"},
		{"linter bad pattern", map[string]string{"schema.sql": "x", "sandbox.yaml": "linters:\n  - pattern: '[x'\n    command: [a]\n"}, "linters[0].pattern"},
		{"server with both", map[string]string{"schema.sql": "x", "sandbox.yaml": "mcp_servers:\n  - name: s\n    command: [a]\n    url: http://x\n"}, "exactly one of command or url"},
		{"server without name", map[string]string{"schema.sql": "x", "sandbox.yaml": "mcp_servers:\n  - url: http://x\n"}, "mcp_servers[0].name: missing"},
		{"negative limit", map[string]string{"schema.sql": "x", "sandbox.yaml": "limits: {max_rows: -1}\n"}, "limits.max_rows: negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFixture(t, t.TempDir(), "fx", c.files)
			_, err := LoadFixture(dir)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("got %v, want an error containing %q", err, c.msg)
			}
		})
	}
	if _, err := LoadFixtures(t.TempDir()); err == nil {
		t.Error("LoadFixtures of an empty directory succeeded")
	}
}
