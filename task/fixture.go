package task

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Fixture is a directory that a task runs against: the database the
// sandbox builds (schema.sql, data.sql), the files run_linter sees
// (workspace/) and the sandbox's settings (sandbox.yaml).
type Fixture struct {
	Name         string // the directory's base name; tasks name it in "fixture"
	Dir          string // absolute path of the fixture directory
	SchemaSQL    string // schema.sql (required, non-empty)
	DataSQL      string // data.sql ("" when absent)
	WorkspaceDir string // absolute path of workspace/ ("" when absent)
	Config       SandboxConfig
}

// SandboxConfig is the parsed sandbox.yaml. Unknown keys are errors.
type SandboxConfig struct {
	// Tools lists the built-in tools to enable; empty means DefaultTools.
	Tools []string `yaml:"tools"`
	// Linters are external linter commands per file pattern.
	Linters []LinterSpec `yaml:"linters"`
	// MCPServers are extra MCP servers whose tools join the catalog.
	MCPServers []ServerSpec `yaml:"mcp_servers"`
	// Limits bound query_database calls.
	Limits Limits `yaml:"limits"`
}

// LinterSpec runs Command (argv; the file path is appended) inside the
// workspace for files whose base name matches Pattern (filepath.Match).
type LinterSpec struct {
	Pattern string        `yaml:"pattern"`
	Command []string      `yaml:"command"`
	Timeout time.Duration `yaml:"timeout"` // "5s"; 0 means the sandbox's default
}

// ServerSpec is an external MCP server: a stdio Command (argv) or an HTTP URL.
type ServerSpec struct {
	Name    string            `yaml:"name"`
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
}

// Limits bound one query_database call; zero values mean the sandbox's defaults.
type Limits struct {
	QueryTimeout time.Duration `yaml:"query_timeout"` // "2s"
	MaxRows      int           `yaml:"max_rows"`
	MaxBytes     int           `yaml:"max_bytes"`
	// MaxMemory bounds what one trajectory's statements may add to the
	// database in memory, in bytes (see sqldb.Options.MaxMemory).
	MaxMemory int64 `yaml:"max_memory"`
}

// Names of the built-in tools.
const (
	ToolQueryDatabase = "query_database"
	ToolRunLinter     = "run_linter"
)

// DefaultTools are the built-in tools enabled when sandbox.yaml names none,
// and the tool catalog of the user's reward function.
var DefaultTools = []string{ToolQueryDatabase, ToolRunLinter}

// Fixture file names.
const (
	SchemaFile    = "schema.sql"
	DataFile      = "data.sql"
	ConfigFile    = "sandbox.yaml"
	WorkspaceName = "workspace"
)

// LoadFixture reads the fixture directory dir.
func LoadFixture(dir string) (*Fixture, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", dir, err)
	}
	fx := &Fixture{Name: filepath.Base(abs), Dir: abs}
	schema, err := os.ReadFile(filepath.Join(abs, SchemaFile))
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %s is required: %w", dir, SchemaFile, err)
	}
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, fmt.Errorf("fixture %s: %s is empty", dir, SchemaFile)
	}
	fx.SchemaSQL = string(schema)
	data, err := os.ReadFile(filepath.Join(abs, DataFile))
	switch {
	case err == nil:
		fx.DataSQL = string(data)
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("fixture %s: %w", dir, err)
	}
	ws := filepath.Join(abs, WorkspaceName)
	if st, err := os.Stat(ws); err == nil {
		if !st.IsDir() {
			return nil, fmt.Errorf("fixture %s: %s is not a directory", dir, WorkspaceName)
		}
		fx.WorkspaceDir = ws
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("fixture %s: %w", dir, err)
	}
	cfgPath := filepath.Join(abs, ConfigFile)
	raw, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		cfg, err := ParseSandboxConfig(raw)
		if err != nil {
			return nil, fmt.Errorf("fixture %s: %s: %w", dir, ConfigFile, err)
		}
		fx.Config = *cfg
	case errors.Is(err, os.ErrNotExist):
	default:
		return nil, fmt.Errorf("fixture %s: %w", dir, err)
	}
	if len(fx.Config.Tools) == 0 {
		fx.Config.Tools = append([]string(nil), DefaultTools...)
	}
	return fx, nil
}

// LoadFixtures loads every subdirectory of dir that holds a schema.sql,
// keyed by name.
func LoadFixtures(dir string) (map[string]*Fixture, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load fixtures: %w", err)
	}
	out := map[string]*Fixture{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, SchemaFile)); err != nil {
			continue
		}
		fx, err := LoadFixture(sub)
		if err != nil {
			return nil, err
		}
		out[fx.Name] = fx
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("load fixtures: no fixture (a directory with %s) in %s", SchemaFile, dir)
	}
	return out, nil
}

// ParseSandboxConfig parses sandbox.yaml strictly: unknown keys and wrong
// types are errors that name the line; the values are then checked.
func ParseSandboxConfig(raw []byte) (*SandboxConfig, error) {
	var cfg SandboxConfig
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, tidyYAMLError(err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func tidyYAMLError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			m = strings.Replace(m, "in type task.", "in ", 1)
			msgs[i] = m
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return err
}

func (c *SandboxConfig) validate() error {
	seen := map[string]bool{}
	for i, t := range c.Tools {
		if strings.TrimSpace(t) == "" {
			return fmt.Errorf("tools[%d]: empty tool name", i)
		}
		if seen[t] {
			return fmt.Errorf("tools[%d]: %q listed twice", i, t)
		}
		seen[t] = true
	}
	for i, l := range c.Linters {
		if l.Pattern == "" {
			return fmt.Errorf("linters[%d].pattern: missing", i)
		}
		if _, err := filepath.Match(l.Pattern, ""); err != nil {
			return fmt.Errorf("linters[%d].pattern: %q: %w", i, l.Pattern, err)
		}
		if len(l.Command) == 0 || l.Command[0] == "" {
			return fmt.Errorf("linters[%d].command: missing", i)
		}
		if l.Timeout < 0 {
			return fmt.Errorf("linters[%d].timeout: negative", i)
		}
	}
	names := map[string]bool{}
	for i, s := range c.MCPServers {
		if s.Name == "" {
			return fmt.Errorf("mcp_servers[%d].name: missing", i)
		}
		if names[s.Name] {
			return fmt.Errorf("mcp_servers[%d].name: %q listed twice", i, s.Name)
		}
		names[s.Name] = true
		if (len(s.Command) == 0) == (s.URL == "") {
			return fmt.Errorf("mcp_servers[%d] (%s): give exactly one of command or url", i, s.Name)
		}
		if len(s.Command) > 0 && s.Command[0] == "" {
			return fmt.Errorf("mcp_servers[%d].command: empty program", i)
		}
		if len(s.Env) > 0 && s.URL != "" {
			return fmt.Errorf("mcp_servers[%d].env: only for command servers", i)
		}
	}
	switch {
	case c.Limits.QueryTimeout < 0:
		return errors.New("limits.query_timeout: negative")
	case c.Limits.MaxRows < 0:
		return errors.New("limits.max_rows: negative")
	case c.Limits.MaxBytes < 0:
		return errors.New("limits.max_bytes: negative")
	case c.Limits.MaxMemory < 0:
		return errors.New("limits.max_memory: negative")
	}
	return nil
}

// Names returns the sorted fixture names of m.
func Names(m map[string]*Fixture) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
