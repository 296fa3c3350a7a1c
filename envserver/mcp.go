package envserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// JSON-RPC 2.0 error codes (OpenEnv's JsonRpcErrorCode).
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
	codeServerError    = -32000
)

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	ID      json.RawMessage `json:"id"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

// rpcResponse carries result or error, never both, and always the id
// (null when the request had none), as OpenEnv's JsonRpcResponse.
type rpcResponse struct {
	ID     json.RawMessage
	Result any
	Error  *rpcError
}

func (r rpcResponse) MarshalJSON() ([]byte, error) {
	id := r.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	if r.Error != nil {
		return json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *rpcError       `json:"error"`
		}{"2.0", id, r.Error})
	}
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, r.Result})
}

func rpcFail(id json.RawMessage, code int, msg string) rpcResponse {
	return rpcResponse{ID: id, Error: &rpcError{Code: code, Message: msg}}
}

// rpcParams are the params of the methods served.
type rpcParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	SessionID string          `json:"session_id"`
	Fixture   string          `json:"fixture"`
	// ForkID, on openenv/session/create, starts the new session's episode
	// from a fork of another (openenv/session/fork).
	ForkID string `json:"fork_id"`
}

// serveMCP answers POST /mcp. The body must be declared JSON: a form or
// text/plain body is what a cross-site page can send without a preflight,
// and gets 415 Unsupported Media Type.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		w.Header().Set("Accept", "application/json")
		writeJSON(w, http.StatusUnsupportedMediaType, rpcFail(nil, codeInvalidRequest,
			fmt.Sprintf("Invalid request: Content-Type must be application/json, got %q", r.Header.Get("Content-Type"))))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxMessageBytes))
	var resp rpcResponse
	var req rpcRequest
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		resp = rpcFail(nil, codeInvalidRequest, fmt.Sprintf("Invalid request: more than %d bytes (the server's limit)", s.opts.MaxMessageBytes))
	case err != nil:
		resp = rpcFail(nil, codeParseError, "Parse error: "+err.Error())
	case json.Unmarshal(body, &req) != nil:
		resp = rpcFail(nil, codeParseError, "Parse error")
	default:
		resp = s.rpc(nil, &req)
	}
	writeJSON(w, http.StatusOK, resp)
}

// rpc answers one JSON-RPC request; ws is the WebSocket session it came on
// (its mu held), nil over POST /mcp.
func (s *Server) rpc(ws *session, req *rpcRequest) rpcResponse {
	id := req.ID
	if req.JSONRPC != "2.0" || req.Method == "" {
		return rpcFail(id, codeInvalidRequest, `Invalid request: jsonrpc must be "2.0" and method is required`)
	}
	var p rpcParams
	if len(req.Params) > 0 && string(req.Params) != "null" {
		if req.Params[0] != '{' || json.Unmarshal(req.Params, &p) != nil {
			return rpcFail(id, codeInvalidParams, "Params must be an object")
		}
	}
	switch req.Method {
	case "openenv/session/create":
		if ws != nil {
			return rpcResponse{ID: id, Result: map[string]string{"session_id": ws.id}}
		}
		if ws != nil && p.ForkID != "" {
			return rpcFail(id, codeInvalidRequest, "A WebSocket session starts from a fork with reset {\"fork_id\": ...}")
		}
		sess, err := s.openHTTP()
		if err != nil {
			e := rpcFail(id, codeServerError, err.Error())
			if errors.Is(err, errHTTPCapacity) {
				n := max(1, s.opts.MaxSessions/2)
				e.Error.Data = map[string]int{"active_sessions": n, "max_sessions": n}
			} else if errors.Is(err, errCapacity) {
				e.Error.Data = map[string]int{"active_sessions": s.opts.MaxSessions, "max_sessions": s.opts.MaxSessions}
			}
			return e
		}
		if p.ForkID != "" {
			sess.mu.Lock()
			perr := sess.resetFromFork(p.ForkID, "")
			var obs ResetObservation
			if perr == nil {
				obs = sess.resetObservation(p.ForkID)
			}
			sess.mu.Unlock()
			if perr != nil {
				sess.end(endClient)
				return rpcFail(id, codeInvalidParams, perr.Code+": "+perr.Message)
			}
			return rpcResponse{ID: id, Result: map[string]any{"session_id": sess.id, "episode_id": obs.EpisodeID, "fork_of": p.ForkID, "step_count": obs.StepCount}}
		}
		return rpcResponse{ID: id, Result: map[string]string{"session_id": sess.id}}
	case "openenv/session/fork":
		// A fork of a session's episode: the WebSocket session's own, or
		// the session params.session_id names.
		target := ws
		if target == nil {
			if p.SessionID == "" {
				return rpcFail(id, codeInvalidParams, "Invalid params - 'session_id' is required")
			}
			if target = s.session(p.SessionID); target == nil || target.ws {
				return rpcFail(id, codeInvalidParams, "Unknown session_id: "+p.SessionID)
			}
			done := target.begin()
			defer done()
			target.mu.Lock()
			defer target.mu.Unlock()
			if target.ended() {
				return rpcFail(id, codeInvalidParams, "Unknown session_id: "+p.SessionID)
			}
		}
		fr, perr := target.fork()
		if perr != nil {
			return rpcFail(id, codeInvalidParams, perr.Code+": "+perr.Message)
		}
		return rpcResponse{ID: id, Result: fr}
	case "openenv/session/close":
		if p.SessionID == "" {
			return rpcFail(id, codeInvalidParams, "Invalid params - 'session_id' is required")
		}
		if ws != nil && p.SessionID == ws.id {
			return rpcFail(id, codeInvalidRequest, "Cannot close active WebSocket-managed session via MCP method")
		}
		target := s.session(p.SessionID)
		if target == nil || target.ws {
			return rpcFail(id, codeInvalidParams, "Unknown session_id: "+p.SessionID)
		}
		target.end(endClient)
		return rpcResponse{ID: id, Result: map[string]any{"session_id": p.SessionID, "closed": true}}
	case "tools/list":
		fx := p.Fixture
		if ws != nil && ws.fixture != "" && fx == "" {
			fx = ws.fixture
		}
		name, perr := s.fixtureFor(fx)
		if perr != nil {
			return rpcFail(id, codeInvalidParams, perr.Message)
		}
		return rpcResponse{ID: id, Result: map[string]any{"tools": s.factories[name].Tools()}}
	case "tools/call":
		if p.Name == "" {
			return rpcFail(id, codeInvalidParams, "Missing 'name' in params")
		}
		if len(p.Arguments) > 0 && string(p.Arguments) != "null" && p.Arguments[0] != '{' {
			return rpcFail(id, codeInvalidParams, "Invalid params - 'arguments' must be an object")
		}
		return s.rpcCall(ws, id, &p)
	default:
		return rpcFail(id, codeMethodNotFound, "Method not found: "+req.Method)
	}
}

// rpcCall runs tools/call in the WebSocket session's fork, in the fork of
// the session params.session_id names, or in a fork made for this call.
func (s *Server) rpcCall(ws *session, id json.RawMessage, p *rpcParams) rpcResponse {
	sess := ws
	if sess == nil && p.SessionID != "" {
		sess = s.session(p.SessionID)
		if sess == nil || sess.ws {
			return rpcFail(id, codeInvalidParams, "Unknown session_id: "+p.SessionID)
		}
		done := sess.begin()
		defer done()
		sess.mu.Lock()
		defer sess.mu.Unlock()
		if sess.ended() {
			return rpcFail(id, codeInvalidParams, "Unknown session_id: "+p.SessionID)
		}
	}
	if sess == nil {
		// A call outside any session: a fork of its own, dropped after.
		tmp, err := s.open(nil)
		if err != nil {
			return rpcFail(id, codeServerError, err.Error())
		}
		defer tmp.end(endClient)
		tmp.mu.Lock()
		defer tmp.mu.Unlock()
		sess = tmp
	}
	if sess.sb == nil || sess.done {
		// MCP clients call tools without a reset: an episode with no task
		// on the named (or only) fixture.
		fx, perr := s.fixtureFor(p.Fixture)
		if perr != nil {
			return rpcFail(id, codeInvalidParams, perr.Message)
		}
		if perr := sess.start(nil, fx, ""); perr != nil {
			return rpcFail(id, codeInternalError, perr.Message)
		}
	}
	obs := sess.call(p.Name, p.Arguments)
	if obs.Error != nil {
		return rpcFail(id, codeInternalError, obs.Error.Message)
	}
	return rpcResponse{ID: id, Result: obs.Result}
}
