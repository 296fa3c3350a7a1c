package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callBuiltin runs a built-in tool's handler in process: the handler the
// sandbox's MCP server runs for tools/call, without the JSON-RPC round trip
// through the in-memory session (whose SDK decodes every message with a
// fresh 32 KiB buffer, which made the round trip most of a call's cost).
// The result is what Call returns over the session: a handler's error is an
// isError result with its text unless the call ran out of time, and the
// structured content is its JSON decoded, as a client decodes it
// (TestBuiltinCallMatchesSession checks both paths give equal results).
func (s *Sandbox) callBuiltin(ctx context.Context, h mcp.ToolHandler, name string, arguments any) (*mcp.CallToolResult, error) {
	// The arguments as the server would receive them: compact JSON.
	var buf bytes.Buffer
	if raw, ok := arguments.(json.RawMessage); ok {
		if err := json.Compact(&buf, raw); err != nil {
			return ErrorResult(fmt.Sprintf("arguments for %s are not valid JSON: %.200s", name, raw)), nil
		}
	} else {
		buf.WriteString("{}")
	}
	args := json.RawMessage(buf.Bytes())
	if s.closed.Load() {
		return nil, fmt.Errorf("sandbox: calling %s: %w", name, mcp.ErrConnectionClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.f.opts.CallTimeout)
	defer cancel()
	res, err := h(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: name, Arguments: args}})
	if cerr := ctx.Err(); cerr != nil {
		// Past the deadline a client stops waiting for the answer.
		if errors.Is(cerr, context.DeadlineExceeded) {
			return nil, fmt.Errorf("sandbox: tool %s did not answer within %s: %w", name, s.f.opts.CallTimeout, cerr)
		}
		return nil, fmt.Errorf("sandbox: calling %s: %w", name, cerr)
	}
	if err != nil {
		if s.closed.Load() {
			return nil, fmt.Errorf("sandbox: calling %s: %w", name, mcp.ErrConnectionClosed)
		}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && werr.Code == codeServerFailure {
			return nil, fmt.Errorf("sandbox: calling %s: %w", name, err)
		}
		return ErrorResult(err.Error()), nil
	}
	out := *res
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	if out.StructuredContent != nil {
		data, err := json.Marshal(out.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("sandbox: calling %s: marshal structured content: %w", name, err)
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("sandbox: calling %s: structured content: %w", name, err)
		}
		out.StructuredContent = v
	}
	return &out, nil
}
