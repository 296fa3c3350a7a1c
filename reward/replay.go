package reward

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/toolcall"
)

// Caller runs one tool call; a *sandbox.Sandbox is one. A tool's own
// failure is a result with IsError; an error means the server failed.
type Caller interface {
	Call(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error)
}

// Replay turns a completion (one assistant text, its calls not yet run)
// into a one-turn trajectory by running its well-formed calls, in order,
// through c; with c nil the calls are parsed and not run (rewards that read
// only the text). Malformed calls are recorded with their parse error and
// not run. A server failure ends the trajectory with Error set, as a
// rollout would; only a cancelled context is returned as an error.
func Replay(ctx context.Context, c Caller, text string) (*chat.Trajectory, error) {
	traj := &chat.Trajectory{Answer: toolcall.StripCalls(text)}
	turn := chat.Turn{Text: text}
	for _, p := range toolcall.Parse(text) {
		cr := chat.CallResult{Call: p.Call}
		if p.Err != nil {
			cr.ParseError = p.Err.Error()
			turn.Calls = append(turn.Calls, cr)
			continue
		}
		if c == nil {
			turn.Calls = append(turn.Calls, cr)
			continue
		}
		if traj.Error != "" {
			break
		}
		res, err := c.Call(ctx, p.Call.Name, p.Call.Arguments)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			traj.Error = err.Error()
			cr.IsError = true
			cr.Text = err.Error()
		default:
			cr.IsError = res.IsError
			cr.Text = sandbox.ResultText(res) // as rollouts read it
			cr.Structured = res.StructuredContent
		}
		turn.Calls = append(turn.Calls, cr)
	}
	traj.Turns = []chat.Turn{turn}
	return traj, nil
}
