package httpguard

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// The limits Serve puts on a client's connection (variables so that tests
// can shorten them).
var (
	// headerTimeout bounds the time a client takes to send a request's
	// headers.
	headerTimeout = 10 * time.Second
	// bodyTimeout bounds the time a client takes to send a request's body,
	// counted from the handler's start; once the body is read the
	// connection has no read deadline (a streamed answer, a WebSocket, a
	// long tool call are not cut).
	bodyTimeout = 60 * time.Second
	// idleTimeout closes a kept-alive connection that sends no next request.
	idleTimeout = 90 * time.Second
)

// Serve serves h on l until ctx ends or the server fails. A client has
// 10 s to send a request's headers and 60 s to send its body, and a
// kept-alive connection is closed after 90 s without a request, so that
// slow or idle connections do not pile up (bound their number with
// LimitListener). When ctx ends it shuts the server down, letting requests
// in flight finish for up to grace, then closes what is left (logging that
// to logger, when not nil). It returns the server's failure, or nil when
// ctx ended it.
func Serve(ctx context.Context, l net.Listener, h http.Handler, grace time.Duration, logger *slog.Logger) error {
	srv := &http.Server{Handler: bodyDeadline(h), ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		if logger != nil {
			logger.Warn("shutdown", "err", err)
		}
		srv.Close()
	}
	return nil
}

// bodyDeadline gives a request with a body bodyTimeout to send it: the
// connection's read deadline is set when the handler starts and cleared
// when the body has been read to its end (or closed). net/http's own
// ReadTimeout cannot serve here: it stays on the connection while the
// handler runs, and its expiry cancels the request of a handler that runs
// longer (a streamed answer, a long tool call).
func bodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(bodyTimeout)) != nil {
			h.ServeHTTP(w, r) // not a connection that takes deadlines
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, clear: func() { rc.SetReadDeadline(time.Time{}) }}
		h.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	once  sync.Once
	clear func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.clear)
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	b.once.Do(b.clear)
	return b.ReadCloser.Close()
}

// LimitListener returns a listener that holds at most n connections open
// at once: Accept waits while n are open, so that more clients wait in the
// kernel's queue instead of each taking a goroutine and buffers. n <= 0
// returns l as is.
func LimitListener(l net.Listener, n int) net.Listener {
	if n <= 0 {
		return l
	}
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
