// Package envserver serves mcprl's live sandboxes as an environment over
// OpenEnv's protocol, so that trainers in other processes (TRL's
// GRPOTrainer through environment_factory, verl's tool agent loop,
// OpenEnv's own EnvClient) run their tool calls in mcprl's forks and read
// mcprl's rewards.
//
// Endpoints (the shapes of openenv.core.env_server, openenv-core 0.3.0):
//
//   - WebSocket /ws: one connection is one session, holding at most one
//     sandbox fork. Messages {"type": "reset"|"step"|"state"|"close"|"mcp",
//     "data": ...} are answered by {"type": "observation"|"state"|"mcp"|"error",
//     "data": ...}. reset starts an episode in a fresh fork (a task id from
//     the task file, or the task's fields inline) and returns the system
//     prompt, the task and the tools' JSON schemas; step runs one action:
//     {"type": "call_tool", "tool_name", "arguments"}, {"type": "list_tools"},
//     or {"type": "finish", "completion"} which scores the episode and ends it
//     (done, with the reward); state returns the episode's state and its
//     reward so far at any time.
//   - POST /mcp: JSON-RPC tools/list and tools/call (in a fork made for the
//     request, or in a session's fork given by params.session_id), and
//     OpenEnv's openenv/session/create and openenv/session/close. The body
//     must be application/json.
//   - GET /health, /schema, /metadata, and /stats (mcprl's counters).
//
// Errors carry OpenEnv's codes (INVALID_JSON, UNKNOWN_TYPE,
// VALIDATION_ERROR, EXECUTION_ERROR, CAPACITY_REACHED, SESSION_ERROR); a bad
// message gets an error and the session stays usable.
//
// Limits: a cap on concurrent sessions (half of them at most made over
// /mcp), an idle timeout after which a session's fork is freed and its
// connection closed (a half-open socket never keeps a slot), a timeout per
// tool call, a maximum message size (a WebSocket frame declaring far more
// ends its connection at once), a cap on the calls a finish replays and on
// a task's inline assertions, and a timeout on a finish, cancelled when its
// client disconnects. Cross-site requests and, on loopback, foreign Host
// headers are refused. Server.Close ends every session and frees every
// fork.
package envserver
