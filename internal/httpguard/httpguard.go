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
	"slices"
	"strings"
)

// Listen listens for TCP on addr. An address without a host (":8080", or
// a bare port "8080") listens on loopback, 127.0.0.1. A host that is not
// loopback is honoured, and a warning naming the exposure is written to
// warn (saying whether a token guards the server, per guarded).
func Listen(addr string, guarded bool, warn io.Writer) (net.Listener, error) {
	if !strings.Contains(addr, ":") && !isPort(addr) {
		return nil, fmt.Errorf("listen address %q has no port: want host:port (e.g. %s), :port or a port number", addr, net.JoinHostPort(addr, "8000"))
	}
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

// isPort reports whether s is a decimal port number.
func isPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
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
// "Authorization: Bearer <token>" (the scheme in any case, as RFC 7235
// says); any other gets 401 Unauthorized with a WWW-Authenticate challenge
// (RFC 6750). GET and HEAD requests for the paths in open (a liveness
// probe's /health) are served without the token. An empty token returns
// next as is.
func Bearer(token string, next http.Handler, open ...string) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && slices.Contains(open, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		scheme, got, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcprl"`)
			http.Error(w, ErrUnauthorized.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SameOrigin wraps next so that a browser cannot reach it from another
// site: a request whose Origin (or Sec-Fetch-Site) says it comes from
// another site is refused with 403 unless it is a GET, HEAD or OPTIONS
// (net/http's CrossOriginProtection), and a request that arrived on a
// loopback address but names another host in its Host header (a DNS
// rebinding page) is refused with 403, as the MCP SDK's streamable-HTTP
// handler does for mcprl sandbox serve. A server listening on another
// address (0.0.0.0, a LAN address) is reached under other names, and its
// Host is not checked there; the Origin check still holds.
func SameOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
			if hostIsLoopback(local.String()) && !hostIsLoopback(r.Host) {
				http.Error(w, fmt.Sprintf("forbidden: Host %q is not this machine (a server on loopback answers requests for localhost only)", r.Host), http.StatusForbidden)
				return
			}
		}
		if err := cop.Check(r); err != nil {
			http.Error(w, "forbidden: a cross-site request ("+err.Error()+")", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostIsLoopback reports whether hostport (host or host:port) names this
// machine only.
func hostIsLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return IsLoopback(strings.ToLower(host))
}
