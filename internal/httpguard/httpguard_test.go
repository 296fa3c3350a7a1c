package httpguard

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestListenLoopbackByDefault(t *testing.T) {
	for _, addr := range []string{":0", "0", "127.0.0.1:0", "localhost:0"} {
		var warn bytes.Buffer
		l, err := Listen(addr, false, &warn)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		host, _, _ := net.SplitHostPort(l.Addr().String())
		l.Close()
		if !net.ParseIP(host).IsLoopback() {
			t.Errorf("%s listened on %s, want loopback", addr, l.Addr())
		}
		if warn.Len() != 0 {
			t.Errorf("%s: unexpected warning %q", addr, warn.String())
		}
	}
}

func TestListenElsewhereWarns(t *testing.T) {
	for _, guarded := range []bool{false, true} {
		var warn bytes.Buffer
		l, err := Listen("0.0.0.0:0", guarded, &warn)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		w := warn.String()
		if !strings.Contains(w, "warning") || !strings.Contains(w, "other machines") {
			t.Errorf("0.0.0.0: warning %q", w)
		}
		if guarded != strings.Contains(w, "bearer token only") {
			t.Errorf("guarded=%v: warning %q", guarded, w)
		}
	}
	if _, err := Listen("not an address:x:y", false, io.Discard); err == nil {
		t.Errorf("a malformed address was accepted")
	}
}

func TestBearer(t *testing.T) {
	h := Bearer("s3cret", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Basic s3cret", http.StatusUnauthorized},
		{"Bearer s3cret", http.StatusOK},
	} {
		req, _ := http.NewRequest("POST", srv.URL, nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Authorization %q: status %d, want %d", tc.header, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("401 without a Bearer challenge")
		}
	}
	// No token: no check.
	open := httptest.NewServer(Bearer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	defer open.Close()
	resp, err := http.Post(open.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("no token: status %d", resp.StatusCode)
	}
}

func TestTokenFromEnv(t *testing.T) {
	if tok, err := TokenFromEnv(""); tok != "" || err != nil {
		t.Errorf("no variable: %q %v", tok, err)
	}
	t.Setenv("MCPRL_TEST_TOKEN", "")
	if _, err := TokenFromEnv("MCPRL_TEST_TOKEN"); err == nil || !strings.Contains(err.Error(), "MCPRL_TEST_TOKEN") {
		t.Errorf("empty variable: %v", err)
	}
	t.Setenv("MCPRL_TEST_TOKEN", " abc ")
	if tok, err := TokenFromEnv("MCPRL_TEST_TOKEN"); tok != "abc" || err != nil {
		t.Errorf("set variable: %q %v", tok, err)
	}
}
