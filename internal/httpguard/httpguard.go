package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
)

// Listen listens for TCP on addr. An address without a host (":8080", or
// a bare port "8080") listens on loopback, 127.0.0.1. A host that is not
// loopback is honoured, and a warning naming the exposure is written to
// warn (saying whether a token guards the server, per guarded).
func Listen(addr string, guarded bool, warn io.Writer) (net.Listener, error) {
	addr = LoopbackDefault(addr)
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: want host:port, :port or a port number: %w", addr, err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if !IsLoopback(host) && warn != nil {
		how := "without authentication: anyone who can reach it can use it (give --token-env VAR to require a bearer token)"
		if guarded {
			how = "guarded by a bearer token only, without TLS (put it behind a TLS proxy on untrusted networks)"
		}
		_, port, _ := net.SplitHostPort(l.Addr().String())
		fmt.Fprintf(warn, "warning: serving on %s, which is reachable from other machines, %s\n", net.JoinHostPort(host, port), how)
	}
	return l, nil
}

// LoopbackDefault returns addr with 127.0.0.1 as its host when it names
// none (":8080" or "8080").
func LoopbackDefault(addr string) string {
	if !strings.Contains(addr, ":") {
		return net.JoinHostPort("127.0.0.1", addr)
	}
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// IsLoopback reports whether host (a name or an IP) is this machine only.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TokenFromEnv returns the bearer token held by the environment variable
// name. An empty name means no token (""); a variable that is unset or
// empty is an error, so that a typo never serves without the token.
func TokenFromEnv(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	tok := strings.TrimSpace(os.Getenv(name))
	if tok == "" {
		return "", fmt.Errorf("--token-env %s: the variable is unset or empty", name)
	}
	return tok, nil
}

// ErrUnauthorized is the message a request without the right token gets.
var ErrUnauthorized = errors.New("unauthorized: send the server's token as Authorization: Bearer <token>")

// Bearer wraps next so that every request must carry the header
// "Authorization: Bearer <token>"; any other gets 401 Unauthorized with a
// WWW-Authenticate challenge (RFC 6750). An empty token returns next as is.
func Bearer(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcprl"`)
			http.Error(w, ErrUnauthorized.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
