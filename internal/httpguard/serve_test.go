package httpguard

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Serve answers requests until its context ends, lets a request in flight
// finish, and then returns nil; a listener that fails is returned.
func TestServe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			time.Sleep(200 * time.Millisecond)
		}
		io.WriteString(w, "ok")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, h, 5*time.Second, nil) }()
	url := "http://" + l.Addr().String()
	if resp, err := http.Get(url + "/"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	slow := make(chan string, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- string(b)
	}()
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after its context ended: %v", err)
	}
	if got := <-slow; got != "ok" {
		t.Errorf("request in flight at shutdown: %q, want ok", got)
	}
	if _, err := http.Get(url + "/"); err == nil {
		t.Error("served after shutdown")
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if err := Serve(context.Background(), closed, h, time.Second, nil); err == nil {
		t.Error("Serve on a closed listener returned nil")
	}
}
