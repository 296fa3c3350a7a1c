package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/task"
)

// codeServerFailure is the JSON-RPC error code a sandbox's server answers
// with when an external server it proxies failed (crashed, hung up): Call
// turns it into an error rather than a result for the model.
const codeServerFailure = -32050

// external is a connected external MCP server from sandbox.yaml.
type external struct {
	name  string
	cs    *mcp.ClientSession
	cmd   *exec.Cmd // nil for HTTP servers
	tools []*mcp.Tool
}

// connectExternal starts (stdio command) or dials (streamable HTTP URL) an
// external server and lists its tools.
func connectExternal(ctx context.Context, client *mcp.Client, fixtureDir string, spec task.ServerSpec, timeout time.Duration) (*external, error) {
	name := spec.Name
	if name == "" {
		name = strings.Join(spec.Command, " ") + spec.URL
	}
	e := &external{name: name}
	var transport mcp.Transport
	switch {
	case len(spec.Command) > 0 && spec.URL != "":
		return nil, fmt.Errorf("sandbox: MCP server %s: give either command or url, not both", name)
	case len(spec.Command) > 0:
		argv0 := spec.Command[0]
		if strings.Contains(argv0, "/") && !filepath.IsAbs(argv0) {
			argv0 = filepath.Join(fixtureDir, argv0)
		}
		cmd := exec.Command(argv0, spec.Command[1:]...)
		cmd.Dir = fixtureDir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8"}
		keys := make([]string, 0, len(spec.Env))
		for k := range spec.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cmd.Env = append(cmd.Env, k+"="+spec.Env[k])
		}
		cmd.Stderr = nil // discarded: servers log there
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		e.cmd = cmd
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: 500 * time.Millisecond}
	case spec.URL != "":
		transport = &mcp.StreamableClientTransport{Endpoint: spec.URL, MaxRetries: -1, DisableStandaloneSSE: true}
	default:
		return nil, fmt.Errorf("sandbox: MCP server %s: needs a command or a url", name)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cs, err := client.Connect(cctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		e.kill()
		return nil, fmt.Errorf("sandbox: connecting MCP server %s: %w", name, err)
	}
	e.cs = cs
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			e.close()
			return nil, fmt.Errorf("sandbox: listing tools of MCP server %s: %w", name, err)
		}
		e.tools = append(e.tools, t)
	}
	return e, nil
}

// proxy forwards a tools/call to the external server. Its error responses
// (unknown tool, a legacy server's -32603) become results the model reads;
// a failed connection becomes a codeServerFailure error.
func (e *external) proxy(tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := e.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: req.Params.Arguments})
		if err == nil {
			return res, nil
		}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) {
			return ErrorResult(fmt.Sprintf("%s (server %s, code %d)", werr.Message, e.name, werr.Code)), nil
		}
		return nil, &jsonrpc.Error{Code: codeServerFailure, Message: fmt.Sprintf("MCP server %s failed: %v", e.name, err)}
	}
}

// close ends the session; a subprocess and its process group are killed.
func (e *external) close() error {
	var err error
	if e.cs != nil {
		err = e.cs.Close()
		if e.cmd != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
	}
	e.kill()
	if e.cmd != nil {
		// A server killed by us ends with a signal: not an error of the sandbox.
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = nil
		}
	}
	return err
}

func (e *external) kill() {
	if e.cmd != nil && e.cmd.Process != nil {
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		if e.cs == nil {
			_ = e.cmd.Wait()
		}
	}
}
