package task

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testFixtures = map[string]*Fixture{"customers": {Name: "customers"}, "shop": {Name: "shop"}}

func TestLoadBadLines(t *testing.T) {
	cases := []struct {
		name, line string
		field      string // want LineError.Field
		msg        string // substring of the error
	}{
		{"malformed JSON", `{"task": "x"`, "", "malformed JSON"},
		{"not JSON", `task: x`, "", "malformed JSON"},
		{"trailing garbage", `{"task": "x"} {"task": "y"}`, "", "trailing data"},
		{"missing task", `{"system_prompt": "s"}`, "task", "missing or empty"},
		{"empty task", `{"task": "   "}`, "task", "missing or empty"},
		{"task not a string", `{"task": 42}`, "task", "wrong type: got JSON number, want a string"},
		{"assertions not an array", `{"task": "x", "ground_truth_assertions": "SELECT 1"}`, "ground_truth_assertions", "want an array of strings"},
		{"assertion not a string", `{"task": "x", "ground_truth_assertions": [1]}`, "ground_truth_assertions", "wrong type"},
		{"empty assertion", `{"task": "x", "ground_truth_assertions": ["SELECT 1", ""]}`, "ground_truth_assertions[1]", "empty assertion"},
		{"unknown field", `{"task": "x", "fixtures": "customers"}`, "fixtures", "unknown field"},
		{"unknown fixture", `{"task": "x", "fixture": "nope"}`, "fixture", `unknown fixture "nope" (known: customers, shop)`},
		{"golden not an array", `{"task": "x", "golden": {"role": "assistant"}}`, "golden", "wrong type"},
		{"golden bad role", `{"task": "x", "golden": [{"role": "robot", "content": "hi"}]}`, "golden[0].role", `unknown role "robot"`},
		{"golden missing role", `{"task": "x", "golden": [{"role": "assistant", "content": "a"}, {"content": "b"}]}`, "golden[1].role", "missing role"},
		{"golden tool call without name", `{"task": "x", "golden": [{"role": "assistant", "tool_calls": [{"arguments": {}}]}]}`, "golden[0].tool_calls[0].name", "missing tool name"},
		{"golden arguments not an object", `{"task": "x", "golden": [{"role": "assistant", "tool_calls": [{"name": "q", "arguments": "SELECT 1"}]}]}`, "golden[0].tool_calls[0].arguments", "JSON object"},
		{"golden tool calls on a tool message", `{"task": "x", "golden": [{"role": "tool", "tool_calls": [{"name": "q"}]}]}`, "golden[0].tool_calls", "only assistant"},
		{"array instead of object", `["x"]`, "", "wrong type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := `{"id": "ok-1", "task": "fine"}` + "\n\n" + c.line + "\n" + `{"task": "fine too"}` + "\n"
			_, err := Read(strings.NewReader(src), "tasks.jsonl", LoadOptions{Fixtures: testFixtures})
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *LineError", err)
			}
			if le.File != "tasks.jsonl" || le.Line != 3 || le.Field != c.field || !strings.Contains(le.Error(), c.msg) {
				t.Errorf("got %+v (%q), want line 3, field %q, message containing %q", le, le.Error(), c.field, c.msg)
			}
			if !strings.HasPrefix(le.Error(), "tasks.jsonl:3: ") {
				t.Errorf("message %q does not start with file:line", le.Error())
			}
			// Skip mode loads the good lines and reports the bad one.
			tasks, err := Read(strings.NewReader(src), "tasks.jsonl", LoadOptions{Fixtures: testFixtures, SkipBad: true})
			var se *SkipError
			if !errors.As(err, &se) || len(se.Skipped) != 1 || se.Loaded != 2 || len(tasks) != 2 {
				t.Fatalf("skip mode: %d tasks, err %v", len(tasks), err)
			}
			if !errors.As(err, &le) || le.Line != 3 {
				t.Errorf("skip mode: the *LineError is not reachable with errors.As: %v", err)
			}
			if tasks[0].ID != "ok-1" || tasks[1].ID != "tasks:4" {
				t.Errorf("ids %q %q", tasks[0].ID, tasks[1].ID)
			}
		})
	}
}

func TestLoadSkipCountsEveryBadLine(t *testing.T) {
	src := strings.Join([]string{
		`{"task": "a", "fixture": "customers"}`,
		`{"task": 1}`,
		`{`,
		`{"task": "b", "fixture": "missing"}`,
		`{"id": "dup", "task": "c"}`,
		`{"id": "dup", "task": "d"}`,
		`{"task": "e", "ground_truth_assertions": ["SELECT 1"], "golden": [{"role": "assistant", "content": "ok"}]}`,
	}, "\n")
	tasks, err := Read(strings.NewReader(src), "t.jsonl", LoadOptions{Fixtures: testFixtures, SkipBad: true})
	var se *SkipError
	if !errors.As(err, &se) {
		t.Fatalf("want *SkipError, got %v", err)
	}
	var lines []int
	for _, le := range se.Skipped {
		lines = append(lines, le.Line)
	}
	if len(tasks) != 3 || se.Loaded != 3 || len(lines) != 4 || lines[0] != 2 || lines[1] != 3 || lines[2] != 4 || lines[3] != 6 {
		t.Fatalf("loaded %d, skipped lines %v: %v", len(tasks), lines, err)
	}
	if se.Skipped[3].Field != "id" || !strings.Contains(se.Skipped[3].Error(), "first on line 5") {
		t.Errorf("duplicate id: %v", se.Skipped[3])
	}
	if !strings.Contains(err.Error(), "4 bad line(s) skipped, 3 task(s) loaded") {
		t.Errorf("summary: %v", err)
	}
	// Stop mode stops at the first bad line.
	if _, err := Read(strings.NewReader(src), "t.jsonl", LoadOptions{Fixtures: testFixtures}); err == nil || !strings.HasPrefix(err.Error(), "t.jsonl:2: field task:") {
		t.Errorf("stop mode: %v", err)
	}
	// Without fixtures to check against, fixture names pass.
	if _, err := Read(strings.NewReader(`{"task": "b", "fixture": "missing"}`), "t.jsonl", LoadOptions{}); err != nil {
		t.Errorf("no fixture map: %v", err)
	}
}

func TestLoadFileAndLongLines(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big.jsonl")
	long := strings.Repeat("x", 200_000) // longer than the reader's buffer
	if err := os.WriteFile(p, []byte(`{"task": "`+long+`"}`+"\r\n"+`{"task": "last line without newline"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tasks, err := Load(p, LoadOptions{})
	if err != nil || len(tasks) != 2 || len(tasks[0].Task) != len(long) || tasks[1].ID != "big:2" {
		t.Fatalf("%d tasks, %v", len(tasks), err)
	}
	if _, err := Load(filepath.Join(dir, "missing.jsonl"), LoadOptions{}); err == nil {
		t.Error("missing file loaded")
	}
}
