package envserver

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// frameGuard hands websocket.Accept a connection that refuses, as soon as
// its header arrives, a frame whose declared payload is over limit bytes.
// The websocket package checks a message's size only as its bytes are
// read, so a frame declaring 2^62 bytes would otherwise hold its
// connection waiting for them.
type frameGuard struct {
	http.ResponseWriter
	limit int64
}

func (g frameGuard) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := g.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("http.ResponseWriter does not implement http.Hijacker")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	// Bytes the server read past the request's headers come first.
	buffered, _ := brw.Reader.Peek(brw.Reader.Buffered())
	fc := &frameConn{Conn: c, r: io.MultiReader(bytes.NewReader(bytes.Clone(buffered)), c), frames: frameReader{limit: g.limit}}
	brw.Reader.Reset(fc)
	return fc, brw, nil
}

func (g frameGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// frameConn is a hijacked connection whose reads pass through frames.
type frameConn struct {
	net.Conn
	r      io.Reader
	frames frameReader
}

func (c *frameConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if ferr := c.frames.feed(p[:n]); ferr != nil {
		return 0, ferr
	}
	return n, err
}

// frameReader follows the frame boundaries of a client's byte stream
// (RFC 6455 section 5.2) and fails on a frame declaring more than limit
// bytes of payload.
type frameReader struct {
	limit   int64
	hdr     [14]byte
	n, need int   // header bytes read, and its length once known
	payload int64 // payload bytes of the current frame still to come
}

func (f *frameReader) feed(p []byte) error {
	for len(p) > 0 {
		if f.payload > 0 {
			k := min(int64(len(p)), f.payload)
			f.payload -= k
			p = p[k:]
			continue
		}
		f.hdr[f.n] = p[0]
		f.n++
		p = p[1:]
		if f.n == 2 {
			f.need = 2
			switch f.hdr[1] & 0x7f {
			case 126:
				f.need += 2
			case 127:
				f.need += 8
			}
			if f.hdr[1]&0x80 != 0 {
				f.need += 4 // the masking key
			}
		}
		if f.n < 2 || f.n < f.need {
			continue
		}
		length := uint64(f.hdr[1] & 0x7f)
		switch length {
		case 126:
			length = uint64(binary.BigEndian.Uint16(f.hdr[2:4]))
		case 127:
			length = binary.BigEndian.Uint64(f.hdr[2:10])
		}
		if length > uint64(f.limit) {
			return fmt.Errorf("a WebSocket frame declares %d bytes, more than the server reads (%d)", length, f.limit)
		}
		f.payload, f.n, f.need = int64(length), 0, 0
	}
	return nil
}
