package sandbox

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeFixture: over HTTP, ServeFixture says where it serves, refuses a
// request without the bearer token, serves the fixture's tools with it, and
// returns when its context ends.
func TestServeFixture(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- ServeFixture(ctx, ServeConfig{Fixture: customersDir, HTTP: "127.0.0.1:0", Token: "secret", Log: &log})
	}()
	start := regexp.MustCompile(`(?m)^mcprl: serving fixture customers \(MCP streamable HTTP\) at (http://[^/]+)/$`)
	var m []string
	for deadline := time.Now().Add(30 * time.Second); m == nil; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("ServeFixture returned %v; log:\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start line; log:\n%s", log.String())
		}
		m = start.FindStringSubmatch(log.String())
	}
	resp, err := http.Post(m[1]+"/", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", resp.StatusCode)
	}
	hc := &http.Client{Transport: bearer{"secret"}}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: m[1], HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sqlCall(cs, "SELECT COUNT(*) FROM customers")
	if v := firstCell(t, res, err); v == nil {
		t.Error("no count")
	}
	cs.Close()
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ServeFixture did not return")
	}
}

// TestServeFixtureMissing: a fixture that does not load fails at once.
func TestServeFixtureMissing(t *testing.T) {
	if err := ServeFixture(context.Background(), ServeConfig{Fixture: t.TempDir() + "/none", Log: io.Discard}); err == nil {
		t.Fatal("no error")
	}
}

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
