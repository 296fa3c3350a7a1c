package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newMemTransports returns two connected in-memory MCP transports, like
// mcp.NewInMemoryTransports, that hand each JSON-RPC message to the other
// side as its wire encoding (jsonrpc.EncodeMessage on the sending side,
// decodeMessage on the receiving side: what crosses is exactly what a
// stream transport would carry). It skips what the SDK's in-memory transport
// adds for a byte stream: newline framing over a synchronous net.Pipe, a
// second decode of every message that probes for a JSON-RPC batch, and the
// SDK decoder's 32 KiB buffer per message. BenchmarkToolsCall compares the two.
func newMemTransports() (mcp.Transport, mcp.Transport) {
	a, b := make(chan []byte, 16), make(chan []byte, 16)
	done := make(chan struct{})
	once := new(sync.Once)
	return &memTransport{&memConn{in: a, out: b, done: done, once: once}},
		&memTransport{&memConn{in: b, out: a, done: done, once: once}}
}

type memTransport struct{ c *memConn }

// Connect implements mcp.Transport.
func (t *memTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// memConn is one end of a pair; closing either end closes both.
type memConn struct {
	in   <-chan []byte
	out  chan<- []byte
	done chan struct{}
	once *sync.Once
}

func (c *memConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, io.EOF
	case data := <-c.in:
		return decodeMessage(data)
	}
}

func (c *memConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return mcp.ErrConnectionClosed
	case c.out <- data:
		return nil
	}
}

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

func (c *memConn) SessionID() string { return "" }

// wireMessage is the wire form of a JSON-RPC message, as the SDK decodes
// it; Method is raw so that a present but empty "method" still makes a request.
type wireMessage struct {
	Version string          `json:"jsonrpc"`
	ID      any             `json:"id,omitempty"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

// decodeMessage is jsonrpc.DecodeMessage with encoding/json (TestDecodeMessage
// checks that both give the same messages).
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var w wireMessage
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", w.Version, "2.0")
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if len(w.Method) > 0 {
		var method string
		if err := json.Unmarshal(w.Method, &method); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("JSON RPC invalid request")
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		resp.Error = w.Error
	}
	return resp, nil
}
