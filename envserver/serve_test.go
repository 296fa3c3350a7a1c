package envserver_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcprl/mcprl/envserver"
)

// TestListenAndServe: the server loads the fixtures and tasks, says where it
// listens, answers with the bearer token only (but /health), and when its
// context ends it closes everything and says so.
func TestListenAndServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- envserver.ListenAndServe(ctx, envserver.ServeConfig{
			Options:     envserver.Options{Rewards: envserver.DefaultRewards},
			FixturesDir: fixturesDir, TasksPath: tasksFile, Listen: "127.0.0.1:0", Token: "secret", Log: pw,
		})
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatalf("no start line: %v", <-done)
	}
	m := regexp.MustCompile(`^mcprl: environment server at (http://[^/]+)/ \(fixtures \.\./examples/fixtures, (\d+) tasks, rewards assertions\)$`).
		FindStringSubmatch(lines.Text())
	if m == nil || m[2] == "0" {
		t.Fatalf("start line %q", lines.Text())
	}
	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", m[1]+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/health", ""); got != http.StatusOK {
		t.Errorf("/health without the token: %d", got)
	}
	if got := get("/stats", ""); got != http.StatusUnauthorized {
		t.Errorf("/stats without the token: %d, want 401", got)
	}
	if got := get("/stats", "secret"); got != http.StatusOK {
		t.Errorf("/stats with the token: %d", got)
	}
	cancel()
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ListenAndServe did not return")
	}
	if !strings.Contains(rest.String(), "mcprl: environment server stopped: 0 sessions and 0 forks closed, 0 tool calls served") {
		t.Errorf("stop line missing: %q", rest.String())
	}
}

// TestListenAndServeBadFixtures: a fixtures directory that does not load
// fails before anything listens.
func TestListenAndServeBadFixtures(t *testing.T) {
	err := envserver.ListenAndServe(context.Background(), envserver.ServeConfig{FixturesDir: t.TempDir() + "/none", Listen: "127.0.0.1:0", Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "envserver: load fixtures") {
		t.Fatalf("err = %v", err)
	}
}
