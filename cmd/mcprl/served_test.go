package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const customersBase = "../../examples/customers/base"

// transformersServe starts `transformers serve` from the test venv
// (.venv, scripts/test-setup.sh) on a free loopback port, serving the model
// directory dir, and returns the API's base URL and the model's name. It
// skips without the venv (fails under CI=true).
func transformersServe(t *testing.T, dir string) (url, name string) {
	t.Helper()
	bin, err := filepath.Abs("../../.venv/bin/transformers")
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no transformers in .venv: run scripts/test-setup.sh")
		}
		t.Skip("no transformers in .venv: run scripts/test-setup.sh")
	}
	name, err = filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "serve", "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--device", "cpu", name)
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "HF_HOME="+t.TempDir())
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("transformers serve log (last 3000 bytes):\n%s", b[max(0, len(b)-3000):])
			}
		}
	})
	url = fmt.Sprintf("http://127.0.0.1:%d/v1", port)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return url, name
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("transformers serve did not come up within 10 minutes: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readEvalRecords reads an eval trajectories.jsonl into a map by task id.
func readEvalRecords(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out[r["task_id"].(string)] = r
	}
	return out
}

// eval --policy against transformers serve serving the customers base model
// (a Qwen2 mcprl wrote: model init, then sft) gives, greedily, the same
// trajectories as eval --model on the same directory: the same turns (the
// server's native tool calls written back as the model wrote them), tool
// results, answers and rewards. Where the server itself fails (transformers
// serve 5.23 answers 500 when its tool-call parser meets a call cut off by
// max_tokens) the trajectory ends with that reason and no reward. Bad
// inputs fail before any work.
func TestEvalServedPolicyEqualsInProcess(t *testing.T) {
	url, name := transformersServe(t, customersBase)
	tasks := filepath.Join(t.TempDir(), "tasks.jsonl")
	var lines []string
	for _, l := range strings.Split(string(must(os.ReadFile("../../examples/customers/quick_tasks.jsonl"))), "\n") {
		for _, id := range []string{`"quick-001"`, `"quick-002"`, `"quick-007"`} {
			if strings.Contains(l, `"id": `+id) {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) != 3 {
		t.Fatalf("found %d of the 3 tasks", len(lines))
	}
	if err := os.WriteFile(tasks, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"eval", "--tasks", tasks, "--fixtures", fixturesRoot, "--temperature", "0", "--max-completion-length", "128"}
	local, served := t.TempDir(), t.TempDir()
	if _, stderr, err := runCmd(append(common, "--model", customersBase, "--output-dir", local)...); err != nil {
		t.Fatalf("eval --model: %v\n%s", err, stderr)
	}
	stdout, stderr, err := runCmd(append(common, "--policy", url, "--served-model", name, "--send-tools", "as-prompted",
		"--tokenizer", customersBase, "--max-retries", "0", "--output-dir", served, "--json")...)
	if err != nil {
		t.Fatalf("eval --policy: %v\n%s", err, stderr)
	}
	want, got := readEvalRecords(t, filepath.Join(local, "trajectories.jsonl")), readEvalRecords(t, filepath.Join(served, "trajectories.jsonl"))
	for _, id := range []string{"quick-002", "quick-007"} {
		w, g := want[id], got[id]
		if w == nil || g == nil || len(w["turns"].([]any)) != 2 {
			t.Fatalf("%s: in-process %v, served %v (want two turns)", id, w, g)
		}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s differs:\nin-process %s\nserved     %s", id, mustMarshal(w), mustMarshal(g))
		}
	}
	// quick-001's second turn is a call cut off at max_completion_length:
	// in process a truncated turn, on transformers serve a parser crash.
	if g := got["quick-001"]; g == nil || !strings.Contains(fmt.Sprint(g["error"]), "policy: HTTP 500") || g["reward"] != nil || g["success"] != false {
		t.Errorf("quick-001 served: %s, want a policy error and no reward", mustMarshal(g))
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep["n_errors"] != 1.0 {
		t.Errorf("report %s (%v): want n_errors 1", stdout, err)
	}

	// chat --policy shows the same session as chat --model.
	first, _, _ := strings.Cut(lines[0], "\n")
	var tk struct {
		SystemPrompt string `json:"system_prompt"`
	}
	if err := json.Unmarshal([]byte(first), &tk); err != nil {
		t.Fatal(err)
	}
	chatArgs := []string{"chat", "--fixture", fixturesRoot + "/customers", "--system-prompt", tk.SystemPrompt, "--max-completion-length", "192"}
	transcripts := map[string]string{}
	for kind, args := range map[string][]string{
		"model":  {"--model", customersBase},
		"policy": {"--policy", url, "--served-model", name, "--send-tools", "as-prompted", "--tokenizer", customersBase},
	} {
		var out, errOut bytes.Buffer
		root := newRootCmd()
		root.SetArgs(append(append([]string{}, chatArgs...), args...))
		root.SetIn(strings.NewReader("How many customers have the status inactive?\n"))
		root.SetOut(&out)
		root.SetErr(&errOut)
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("chat --%s: %v\n%s", kind, err, errOut.String())
		}
		transcripts[kind] = out.String()
	}
	if m, p := transcripts["model"], transcripts["policy"]; m != p || !strings.Contains(p, "call: query_database") || !strings.Contains(p, "answer: ") {
		t.Errorf("chat transcripts differ or lack a call and an answer:\n--model:\n%s\n--policy:\n%s", m, p)
	}

	// Bad input: each fails before any trajectory runs.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", url, "--served-model", "nope-7b"}, `does not serve model "nope-7b"`},
		{[]string{"--policy", "http://127.0.0.1:1/v1", "--served-model", name}, "cannot reach the chat-completions server at http://127.0.0.1:1/v1"},
		{[]string{"--policy", url, "--served-model", name, "--model", customersBase}, "give one policy"},
		{[]string{"--policy", url}, "--policy needs --served-model"},
		{[]string{"--policy", url, "--served-model", name, "--api-key-env", "MCPRL_TEST_NO_SUCH_VAR"}, "--api-key-env MCPRL_TEST_NO_SUCH_VAR: the environment variable is empty"},
	} {
		_, stderr, err := runCmd(append(common, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(stderr, "eval: 3 tasks") {
			t.Errorf("%v: error %v, want %q before any work\n%s", tc.args, err, tc.want, stderr)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
