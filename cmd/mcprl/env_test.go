package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// startEnvServe runs `mcprl env serve` on a free loopback port and returns
// the process, its base URL and a reader of the rest of its stderr.
func startEnvServe(t *testing.T, bin string, extra ...string) (*exec.Cmd, string, *bufio.Reader) {
	t.Helper()
	args := append([]string{"env", "serve", "--fixtures", "../../examples/fixtures", "--tasks", "../../examples/customers/tasks.jsonl",
		"--listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	br := bufio.NewReader(stderr)
	re := regexp.MustCompile(`environment server at (http://[^/ ]+)/`)
	var m []string
	for m == nil {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("env serve: %v: %s", err, line)
		}
		m = re.FindStringSubmatch(line)
	}
	return cmd, m[1], br
}

// TestEnvServeSIGTERM: the server answers a session, and SIGTERM closes
// every session and fork and exits 0.
func TestEnvServeSIGTERM(t *testing.T) {
	bin := buildMcprl(t)
	cmd, base, stderr := startEnvServe(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(base, "http") + "/ws"
	closed := make(chan websocket.StatusCode, 3)
	for i := 0; i < 3; i++ {
		c, _, err := websocket.Dial(ctx, ws, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type": "reset", "data": {"task_id": "customers-inactive-001"}}`)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.Read(ctx)
		if err != nil || !strings.Contains(string(b), `"observation"`) {
			t.Fatalf("reset: %v %s", err, b)
		}
		go func() {
			_, _, err := c.Read(ctx)
			closed <- websocket.CloseStatus(err)
		}()
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("env serve exited with %v: %s", err, rest)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("env serve did not exit after SIGTERM")
	}
	if !strings.Contains(string(rest), "3 sessions and 3 forks closed") {
		t.Errorf("stderr after SIGTERM: %s", rest)
	}
	for i := 0; i < 3; i++ {
		if st := <-closed; st != websocket.StatusGoingAway && st != -1 { // see envserver's TestCloseFreesEverything
			t.Errorf("client saw close %v, want %v", st, websocket.StatusGoingAway)
		}
	}
}

// TestEnvServeListensOnLoopback: without --listen the server binds
// 127.0.0.1, never every interface.
func TestEnvServeListensOnLoopback(t *testing.T) {
	f := newEnvServeCmd().Flags().Lookup("listen")
	if f == nil || !strings.HasPrefix(f.DefValue, "127.0.0.1:") {
		t.Fatalf("--listen defaults to %v", f)
	}
}

// TestEnvServeToken: with --token-env every endpoint but /health, the
// WebSocket one included, answers 401 without the token and serves with
// it (the scheme in any case); /health answers liveness probes without it.
func TestEnvServeToken(t *testing.T) {
	bin := buildMcprl(t)
	t.Setenv("MCPRL_ENV_TEST_TOKEN", "s3cret")
	_, base, _ := startEnvServe(t, bin, "--token-env", "MCPRL_ENV_TEST_TOKEN")
	if resp, err := http.Get(base + "/health"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Errorf("/health without a token: %d, want 200", resp.StatusCode)
	}
	get := func(token string) int {
		req, err := http.NewRequest("GET", base+"/stats", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(""); got != http.StatusUnauthorized {
		t.Errorf("/stats without a token: %d, want 401", got)
	}
	if got := get("Bearer wrong"); got != http.StatusUnauthorized {
		t.Errorf("/stats with a wrong token: %d, want 401", got)
	}
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret"} {
		if got := get(auth); got != http.StatusOK {
			t.Errorf("/stats with %q: %d, want 200", auth, got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(base, "http") + "/ws"
	if _, resp, err := websocket.Dial(ctx, ws, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/ws without a token: err %v, response %v; want 401", err, resp)
	}
	c, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer s3cret"}}})
	if err != nil {
		t.Fatalf("/ws with the token: %v", err)
	}
	c.CloseNow()
}

// TestEnvServeTokenEnvUnset: naming an unset variable is an error, never a
// server without its token.
func TestEnvServeTokenEnvUnset(t *testing.T) {
	bin := buildMcprl(t)
	out, err := exec.Command(bin, "env", "serve", "--fixtures", "../../examples/fixtures", "--token-env", "MCPRL_ENV_TEST_UNSET").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "MCPRL_ENV_TEST_UNSET") {
		t.Fatalf("err %v, output %s", err, out)
	}
}
