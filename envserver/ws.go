package envserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// writeTimeout bounds sending one message: a peer that stops reading does
// not hold its session past it.
const writeTimeout = 10 * time.Second

// message is one client message on /ws.
type message struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	s.conns.Add(1)
	defer s.conns.Done()
	var alive atomic.Pointer[session]
	// A frame declaring more than the most read refuses (17 times the
	// message cap) ends the connection when its header arrives.
	c, err := websocket.Accept(frameGuard{ResponseWriter: w, limit: 17 * s.opts.MaxMessageBytes}, r, &websocket.AcceptOptions{
		// A client's keepalive pings count as activity.
		OnPingReceived: func(context.Context, []byte) bool {
			if sess := alive.Load(); sess != nil {
				sess.touch()
			}
			return true
		},
	})
	if err != nil {
		return // Accept has answered the request
	}
	c.SetReadLimit(-1) // the size cap is enforced per message below, so that the session survives
	sess, err := s.open(c)
	if err != nil {
		code, status := CodeSession, websocket.StatusGoingAway
		if errors.Is(err, errCapacity) {
			code, status = CodeCapacityReached, websocket.StatusTryAgainLater
		}
		data := map[string]any{"message": err.Error(), "code": code}
		if code == CodeCapacityReached {
			data["active_sessions"], data["max_sessions"] = s.opts.MaxSessions, s.opts.MaxSessions
		}
		s.send(context.Background(), c, response{Type: typeError, Data: data})
		c.Close(status, err.Error())
		return
	}
	alive.Store(sess)
	defer sess.release()
	// The connection is read while a message is handled, so that a client
	// that disconnects cancels its session's work (a tool call, a finish's
	// replay and scoring) at once; messages are still handled one at a
	// time, in order.
	msgs := make(chan inbound)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			// Not sess.ctx: ending a session closes the connection with a
			// status (hangUp), which ends this read.
			raw, perr, err := s.read(context.Background(), c)
			if err != nil {
				sess.cancel() // the client is gone: stop what runs for it
			}
			select {
			case msgs <- inbound{raw, perr, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		in := <-msgs
		if in.err != nil {
			s.opts.Logger.Info("envserver: connection ended", "session", sess.id, "err", in.err)
			if !sess.ended() {
				c.CloseNow()
			}
			return
		}
		done := sess.begin()
		var resp response
		if in.perr == nil {
			var closing bool
			resp, closing = s.handle(sess, in.raw)
			if closing {
				done()
				sess.release() // before the close handshake, which waits on the peer
				c.Close(websocket.StatusNormalClosure, "")
				return
			}
		} else {
			resp = errorResponse(in.perr)
		}
		// Not sess.ctx either: ending the session cancels it, and a write
		// whose context ends cuts the connection before the close frame.
		err = s.send(context.Background(), c, resp)
		done()
		if err != nil {
			c.CloseNow()
			return
		}
	}
}

// inbound is one read of the connection: a message, a message refused
// (perr), or the connection's end (err).
type inbound struct {
	raw  []byte
	perr *protoError
	err  error
}

// read reads one message of at most MaxMessageBytes. A larger message is
// read to its end (up to 16 times the cap) and answered with perr; beyond
// that, or when the peer fails, err ends the connection.
func (s *Server) read(ctx context.Context, c *websocket.Conn) (_ []byte, perr *protoError, err error) {
	_, rd, err := c.Reader(ctx)
	if err != nil {
		return nil, nil, err
	}
	max := s.opts.MaxMessageBytes
	b, err := io.ReadAll(io.LimitReader(rd, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) <= max {
		return b, nil, nil
	}
	n, err := io.Copy(io.Discard, io.LimitReader(rd, 16*max))
	if err != nil {
		return nil, nil, err
	}
	if n == 16*max {
		return nil, nil, fmt.Errorf("message of more than %d bytes", 17*max)
	}
	return nil, &protoError{Code: CodeValidation, Message: fmt.Sprintf("message of more than %d bytes (the server's limit)", max)}, nil
}

func (s *Server) send(ctx context.Context, c *websocket.Conn, resp response) error {
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(errorResponse(execution("encoding the answer: %v", err)))
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, b)
}

// handle answers one message; closing reports a close message.
func (s *Server) handle(sess *session, raw []byte) (_ response, closing bool) {
	var m message
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || !json.Valid(raw) {
			return errorResponse(&protoError{Code: CodeInvalidJSON, Message: "Invalid JSON: " + err.Error()}), false
		}
		return errorResponse(decodeError("message", err)), false
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.ended() {
		return errorResponse(&protoError{Code: CodeSession, Message: "session ended"}), false
	}
	var (
		res  StepResult
		perr *protoError
	)
	switch m.Type {
	case typeReset:
		res, perr = sess.reset(m.Data)
	case typeStep:
		res, perr = sess.step(m.Data)
	case typeState:
		st, perr := sess.state()
		if perr != nil {
			return errorResponse(perr), false
		}
		return response{Type: typeState, Data: st}, false
	case typeClose:
		return response{}, true
	case typeFork:
		fr, perr := sess.fork()
		if perr != nil {
			return errorResponse(perr), false
		}
		return response{Type: typeFork, Data: fr}, false
	case typeMCP:
		var req rpcRequest
		if len(m.Data) == 0 || json.Unmarshal(m.Data, &req) != nil {
			return response{Type: typeMCP, Data: rpcFail(nil, codeInvalidRequest, "Invalid request: data must be a JSON-RPC request object")}, false
		}
		return response{Type: typeMCP, Data: s.rpc(sess, &req)}, false
	default:
		return errorResponse(&protoError{Code: CodeUnknownType, Message: fmt.Sprintf("Unknown message type: %s", m.Type)}), false
	}
	if perr != nil {
		return errorResponse(perr), false
	}
	return response{Type: typeObservation, Data: res}, false
}
