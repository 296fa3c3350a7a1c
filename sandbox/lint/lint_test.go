package lint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcprl/mcprl/sandbox/sqllex"
)

// workspace writes files (name -> content) into a new temp workspace.
func workspace(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newLinter(t *testing.T, dir string, opts Options) *Linter {
	t.Helper()
	l, err := New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestRefusals(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.json"), []byte(`{"secret":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := workspace(t, map[string]string{
		"ok.json":        `{"a": 1}`,
		"sub/inner.json": `[1, 2]`,
		"notes.txt":      "hello",
		"big.json":       "[" + strings.Repeat("1,", 600) + "1]",
	})
	mustSymlink(t, filepath.Join(outside, "secret.json"), filepath.Join(dir, "abs_out.json"))
	mustSymlink(t, "../"+filepath.Base(outside)+"/secret.json", filepath.Join(dir, "rel_out.json"))
	mustSymlink(t, outside, filepath.Join(dir, "dirlink"))
	mustSymlink(t, "ok.json", filepath.Join(dir, "inside.json")) // stays inside: allowed
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := newLinter(t, dir, Options{MaxFileBytes: 1000})

	cases := []struct{ path, reason string }{
		{"", "empty"},
		{"/etc/passwd", "absolute"},
		{filepath.Join(dir, "ok.json"), "absolute"},
		{"../" + filepath.Base(outside) + "/secret.json", `".." is not allowed`},
		{"sub/../../x.json", `".." is not allowed`},
		{"..", `".." is not allowed`},
		{"abs_out.json", "outside the workspace"},
		{"rel_out.json", "outside the workspace"},
		{"dirlink/secret.json", "outside the workspace"},
		{"sub", "is a directory"},
		{".", "is a directory"},
		{"missing.sql", "no such file"},
		{"notes.txt", "no linter for this kind of file"},
		{`sub\inner.json`, "forward slashes"},
		{"ok.json\x00.sql", "NUL"},
		{"fifo.json", "not a regular file"},
		{"big.json", "larger than 1000 bytes"},
	}
	for _, c := range cases {
		res, err := l.Lint(context.Background(), c.path, Databases{})
		var re *RefusalError
		if !errors.As(err, &re) {
			t.Errorf("Lint(%q) = %+v, %v; want a refusal", c.path, res, err)
			continue
		}
		if !strings.Contains(re.Error(), c.reason) {
			t.Errorf("Lint(%q) refusal %q does not say %q", c.path, re.Error(), c.reason)
		}
		if strings.Contains(re.Error(), outside) && !strings.Contains(c.path, outside) {
			t.Errorf("Lint(%q) refusal leaks a host path: %q", c.path, re.Error())
		}
	}
	for _, ok := range []string{"ok.json", "./ok.json", "sub/inner.json", "inside.json", "sub//inner.json"} {
		res, err := l.Lint(context.Background(), ok, Databases{})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("Lint(%q) = %+v, %v; want clean", ok, res, err)
		}
	}

	none := newLinter(t, "", Options{})
	if _, err := none.Lint(context.Background(), "ok.json", Databases{}); err == nil || !strings.Contains(err.Error(), "no workspace") {
		t.Errorf("linter without a workspace: %v", err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestJSON(t *testing.T) {
	dir := workspace(t, map[string]string{
		"good.json":     "{\n  \"a\": [1, 2, {\"b\": null}]\n}\n",
		"bad.json":      "{\n  \"a\": 1,\n  \"b\": 2,,\n  \"c\": 3\n}\n",
		"trailing.json": "{\"a\": 1}\n\n{\"b\": 2}\n",
		"cut.json":      "{\n  \"a\": [1,\n",
		"empty.json":    "  \n",
	})
	l := newLinter(t, dir, Options{})
	cases := []struct {
		path     string
		exit     int
		line     int
		contains string
	}{
		{"good.json", 0, 0, ""},
		{"bad.json", 1, 3, "invalid character ','"},
		{"trailing.json", 1, 3, "unexpected data after"},
		{"cut.json", 1, 3, "unexpected end"},
		{"empty.json", 1, 2, "empty file"},
	}
	for _, c := range cases {
		res, err := l.Lint(context.Background(), c.path, Databases{})
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		checkResult(t, res, c.exit, c.line, c.contains)
		if res.Linter != "json" {
			t.Errorf("%s: linter %q", c.path, res.Linter)
		}
	}
}

func TestYAML(t *testing.T) {
	dir := workspace(t, map[string]string{
		"good.yaml": "a: 1\nb:\n  - x\n  - y\n---\nsecond: doc\n",
		"bad.yml":   "a: 1\nb:\n  - x\n  c: 2\n",
		"tab.yaml":  "a:\n\tb: 1\n",
		"dup.yaml":  "name: a\nother: 1\nname: b\n",
		"doc2.yaml": "ok: 1\n---\nkey: [unclosed\n",
	})
	l := newLinter(t, dir, Options{})
	cases := []struct {
		path     string
		exit     int
		line     int
		contains string
	}{
		{"good.yaml", 0, 0, ""},
		{"bad.yml", 1, 4, "did not find expected"},
		{"tab.yaml", 1, 2, "cannot start any token"},
		{"dup.yaml", 1, 3, `"name" already defined at line 1`},
		{"doc2.yaml", 1, 3, "did not find expected ',' or ']'"},
	}
	for _, c := range cases {
		res, err := l.Lint(context.Background(), c.path, Databases{})
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		checkResult(t, res, c.exit, c.line, c.contains)
	}
}

// checkResult checks the exit code, and for failures that the first
// finding is on line with a message containing contains.
func checkResult(t *testing.T, res *Result, exit, line int, contains string) {
	t.Helper()
	if res.ExitCode != exit {
		t.Errorf("%s: exit code %d, want %d (%+v)", res.Path, res.ExitCode, exit, res.Findings)
		return
	}
	if exit == 0 {
		if len(res.Findings) != 0 {
			t.Errorf("%s: clean file has findings %+v", res.Path, res.Findings)
		}
		if !strings.Contains(res.Text(), "exit code 0") {
			t.Errorf("%s: text %q", res.Path, res.Text())
		}
		return
	}
	if len(res.Findings) == 0 {
		t.Errorf("%s: exit %d without findings", res.Path, exit)
		return
	}
	f := res.Findings[0]
	if f.Line != line || !strings.Contains(f.Message, contains) {
		t.Errorf("%s: first finding %+v, want line %d containing %q", res.Path, f, line, contains)
	}
	want := res.Path + ":" + strconv.Itoa(f.Line) + ":"
	if !strings.Contains(res.Text(), want) || !strings.Contains(res.Text(), "exit code "+strconv.Itoa(exit)) {
		t.Errorf("%s: text %q lacks %q or the exit code", res.Path, res.Text(), want)
	}
}

func TestExternalCommand(t *testing.T) {
	t.Setenv("MCPRL_LINT_SECRET", "leaked")
	dir := workspace(t, map[string]string{
		"app.py":      "print('hi')\n",
		"clean.py":    "x = 1\n",
		"slow.sh":     "",
		"loud.txt":    "",
		"env.cfg":     "",
		"scripts/x.y": "",
	})
	script := filepath.Join(dir, "check.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = clean.py ] && exit 0\necho \"$1:2:5: line too clever\"\necho \"$1:7: missing docstring\"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := newLinter(t, dir, Options{
		MaxOutputBytes: 1000,
		Commands: []Command{
			{Pattern: "*.py", Argv: []string{"./check.sh"}},
			{Pattern: "slow.sh", Argv: []string{"sh", "-c", "sleep 30 & echo child $!; wait", "sh", "{path}"}, Timeout: 300 * time.Millisecond},
			{Pattern: "loud.txt", Argv: []string{"sh", "-c", "yes lint | head -c 200000"}},
			{Pattern: "env.cfg", Argv: []string{"sh", "-c", "env; pwd"}},
			{Pattern: "scripts/*", Argv: []string{"/nonexistent/linter"}},
		},
	})
	ctx := context.Background()

	res, err := l.Lint(ctx, "app.py", Databases{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || len(res.Findings) != 2 || res.Findings[0] != (Finding{Line: 2, Column: 5, Message: "line too clever"}) || res.Findings[1].Line != 7 {
		t.Errorf("app.py: %+v", res)
	}
	if res, err := l.Lint(ctx, "clean.py", Databases{}); err != nil || res.ExitCode != 0 {
		t.Errorf("clean.py: %+v %v", res, err)
	}

	start := time.Now()
	res, err = l.Lint(ctx, "slow.sh", Databases{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != ExitTimeout || time.Since(start) > 5*time.Second {
		t.Errorf("slow.sh: %+v after %s", res, time.Since(start))
	}
	var child int
	for _, line := range strings.Split(res.Output, "\n") {
		if s, ok := strings.CutPrefix(line, "child "); ok {
			child, _ = strconv.Atoi(s)
		}
	}
	if child == 0 {
		t.Fatalf("slow.sh printed no child pid: %q", res.Output)
	}
	waitGone(t, child)

	res, err = l.Lint(ctx, "loud.txt", Databases{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Output) != 1000 || res.ExitCode != 0 {
		t.Errorf("loud.txt: truncated=%v len=%d exit=%d", res.Truncated, len(res.Output), res.ExitCode)
	}

	res, err = l.Lint(ctx, "env.cfg", Databases{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Output, "MCPRL_LINT_SECRET") || !strings.Contains(res.Output, "\n"+dir+"\n") {
		t.Errorf("env.cfg: environment leaks or wrong working directory:\n%s", res.Output)
	}

	_, err = l.Lint(ctx, "scripts/x.y", Databases{})
	var re *RefusalError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "could not run") {
		t.Errorf("missing linter binary: %v", err)
	}
}

// waitGone waits until pid no longer runs (a zombie counts as gone).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 100; i++ {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("process %d outlived its linter's timeout", pid)
}

// TestSplitSQL: statements with their lines, split at top-level semicolons
// as each dialect reads them: quotes, comments, PostgreSQL's dollar quotes,
// SQLite's trigger bodies.
func TestSplitSQL(t *testing.T) {
	type want struct {
		line   int
		prefix string
	}
	for _, c := range []struct {
		d    sqllex.Dialect
		src  string
		want []want
	}{
		{sqllex.SQLite, "-- header; not a statement\nSELECT 'a;b', \"c;d\" FROM t; /* x; */ SELECT 2\n;\n\n" +
			"CREATE TRIGGER tr AFTER INSERT ON t BEGIN\n  UPDATE t SET a = 1;\n  DELETE FROM u;\nEND;\nSELECT 'it''s'; -- tail\n-- only a comment\n",
			[]want{{2, "SELECT 'a;b'"}, {2, "SELECT 2"}, {5, "CREATE TRIGGER"}, {9, "SELECT 'it''s'"}}},
		{sqllex.PostgreSQL, "SELECT 1;\nCREATE FUNCTION f() RETURNS int AS $fn$ SELECT 1; $fn$ LANGUAGE sql;\n  SELECT 'open",
			[]want{{1, "SELECT 1"}, {2, "CREATE FUNCTION"}, {3, "SELECT 'open"}}},
	} {
		got := splitSQL(c.src, c.d)
		if len(got) != len(c.want) {
			t.Fatalf("got %d statements: %+v", len(got), got)
		}
		for i, w := range c.want {
			if got[i].Line != w.line || !strings.HasPrefix(got[i].Text, w.prefix) {
				t.Errorf("statement %d = line %d %q, want line %d %q", i, got[i].Line, got[i].Text, w.line, w.prefix)
			}
		}
		if c.d == sqllex.SQLite && !strings.HasSuffix(got[2].Text, "END") {
			t.Errorf("trigger body was split: %q", got[2].Text)
		}
		if c.d == sqllex.PostgreSQL && (got[2].Col != 3 || got[2].Off != strings.Index(c.src, "SELECT 'open")) {
			t.Errorf("last statement at column %d, offset %d", got[2].Col, got[2].Off)
		}
	}
}
