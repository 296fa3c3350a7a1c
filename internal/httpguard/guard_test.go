package httpguard

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestListenWithoutPort: a host without a port is a clear error, not
// "unknown port" from the resolver.
func TestListenWithoutPort(t *testing.T) {
	for _, addr := range []string{"127.0.0.1", "localhost", "0.0.0.0"} {
		_, err := Listen(addr, false, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "has no port") || !strings.Contains(err.Error(), addr+":8000") {
			t.Errorf("Listen(%q): %v, want a no-port error suggesting %s:8000", addr, err, addr)
		}
	}
}

// TestBearerSchemeCaseAndOpenPaths: the scheme is case-insensitive (RFC
// 7235), and the open paths answer GET and HEAD without the token.
func TestBearerSchemeCaseAndOpenPaths(t *testing.T) {
	srv := httptest.NewServer(Bearer("s3cret", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), "/health"))
	defer srv.Close()
	for _, tc := range []struct {
		method, path, header string
		want                 int
	}{
		{"POST", "/", "bearer s3cret", http.StatusOK},
		{"POST", "/", "BEARER  s3cret", http.StatusOK},
		{"POST", "/", "Bearers3cret", http.StatusUnauthorized},
		{"POST", "/", "bearer", http.StatusUnauthorized},
		{"GET", "/health", "", http.StatusOK},
		{"HEAD", "/health", "", http.StatusOK},
		{"POST", "/health", "", http.StatusUnauthorized},
		{"GET", "/health/x", "", http.StatusUnauthorized},
		{"GET", "/stats", "", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s Authorization %q: %d, want %d", tc.method, tc.path, tc.header, resp.StatusCode, tc.want)
		}
	}
}

// TestSameOrigin: issue 29's cross-site POST (text/plain, a foreign Origin)
// and a foreign Host on a loopback server are refused.
func TestSameOrigin(t *testing.T) {
	srv := httptest.NewServer(SameOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, tc := range []struct {
		method, host, origin, site string
		want                       int
	}{
		{"POST", "", "", "", http.StatusOK},
		{"POST", "", "http://127.0.0.1:" + port, "", http.StatusOK},
		{"POST", "localhost:" + port, "http://localhost:" + port, "", http.StatusOK},
		{"POST", "[::1]:" + port, "", "", http.StatusOK},
		{"POST", "", "http://evil.example", "", http.StatusForbidden},
		{"POST", "", "", "cross-site", http.StatusForbidden},
		{"POST", "", "http://127.0.0.1:1", "", http.StatusForbidden},
		{"POST", "evil.example", "", "", http.StatusForbidden},
		{"GET", "evil.example:" + port, "", "", http.StatusForbidden},
		{"GET", "", "http://evil.example", "", http.StatusOK}, // a browser cannot read it without CORS
	} {
		req, _ := http.NewRequest(tc.method, srv.URL, strings.NewReader(`{"jsonrpc": "2.0"}`))
		req.Header.Set("Content-Type", "text/plain")
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.site != "" {
			req.Header.Set("Sec-Fetch-Site", tc.site)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s Host %q Origin %q Sec-Fetch-Site %q: %d, want %d", tc.method, tc.host, tc.origin, tc.site, resp.StatusCode, tc.want)
		}
	}
}

// serveShort serves h with body and idle timeouts of d until the test ends.
func serveShort(t *testing.T, l net.Listener, h http.Handler, d time.Duration) string {
	t.Helper()
	oldBody, oldIdle := bodyTimeout, idleTimeout
	bodyTimeout, idleTimeout = d, d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, h, time.Second, nil) }()
	t.Cleanup(func() {
		cancel()
		<-done
		bodyTimeout, idleTimeout = oldBody, oldIdle
	})
	return l.Addr().String()
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if err == nil {
		return true // EOF: closed
	}
	if ok := asNetErr(err, &ne); ok && ne.Timeout() {
		return false
	}
	return true // reset
}

func asNetErr(err error, ne *net.Error) bool {
	e, ok := err.(net.Error)
	if ok {
		*ne = e
	}
	return ok
}

// TestServeTimesOutSlowAndIdleConnections: a client that stops sending
// its body, or keeps a connection without a next request, is cut off; a
// handler that runs past the body timeout after reading its body is not.
func TestServeTimesOutSlowAndIdleConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bodyErr := make(chan error, 1)
	addr := serveShort(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-body" {
			_, err := io.ReadAll(r.Body)
			bodyErr <- err
			return
		}
		io.ReadAll(r.Body)
		if r.URL.Path == "/long" {
			time.Sleep(700 * time.Millisecond) // past the body timeout
			if err := r.Context().Err(); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
		}
		io.WriteString(w, "ok")
	}), 300*time.Millisecond)

	// A body that never comes.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /slow-body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
	select {
	case err := <-bodyErr:
		if err == nil {
			t.Error("a body cut short read without error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a client that stopped sending its body held its handler for 5 s (body timeout 300 ms)")
	}

	// A long handler after its body: answered.
	resp, err := http.Post("http://"+addr+"/long", "application/json", strings.NewReader(`{"a": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Errorf("a handler running past the body timeout after its body: %d %q", resp.StatusCode, b)
	}

	// An idle kept-alive connection.
	k, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	io.WriteString(k, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(k)
	if resp, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	} else {
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if !closedWithin(k, 5*time.Second) {
		t.Error("an idle kept-alive connection was still open after 5 s (idle timeout 300 ms)")
	}
}

// TestLimitListener: past the cap a connection waits until one closes.
func TestLimitListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveShort(t, LimitListener(l, 1), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), 30*time.Second)
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(first, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(first), nil); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	io.WriteString(second, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	second.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	if _, err := second.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection past the cap was served while the first was open")
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(second), nil); err != nil {
		t.Fatalf("the waiting connection after the first closed: %v", err)
	} else {
		resp.Body.Close()
	}
}
