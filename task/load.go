package task

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mcprl/mcprl/chat"
)

// LoadOptions controls Load.
type LoadOptions struct {
	// Fixtures, when non-nil, are the fixtures a task may name: a task whose
	// fixture is not a key is a bad line. When nil, fixture names are not checked.
	Fixtures map[string]*Fixture
	// SkipBad loads every good line and skips the bad ones; Load then returns
	// the good tasks together with a *SkipError listing each skipped line.
	// Without it Load stops at the first bad line and returns its *LineError.
	SkipBad bool
	// Check, when set, validates each task that parsed (reward.CheckTask
	// compiles its assertions): an error makes the line bad, reported with
	// the file, the line and the field Check names, so that a broken
	// assertion fails at loading rather than at scoring.
	Check func(*Task) (field string, err error)
}

// LineError is one bad line of a tasks file.
type LineError struct {
	File  string // the file as given to Load
	Line  int    // 1-based line number
	Field string // JSON path of the offending field ("task", "golden[1].role"); "" for the line as a whole
	Err   error
}

func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: field %s: %v", e.File, e.Line, e.Field, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// SkipError reports the lines that Load skipped under LoadOptions.SkipBad.
type SkipError struct {
	Loaded  int          // tasks loaded
	Skipped []*LineError // one per bad line, in file order
}

func (e *SkipError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d bad line(s) skipped, %d task(s) loaded", len(e.Skipped), e.Loaded)
	for i, le := range e.Skipped {
		if i == 10 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e.Skipped)-10)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(le.Error())
	}
	return b.String()
}

// Unwrap gives errors.As access to each *LineError.
func (e *SkipError) Unwrap() []error {
	errs := make([]error, len(e.Skipped))
	for i, le := range e.Skipped {
		errs[i] = le
	}
	return errs
}

// maxLine bounds one JSONL line (golden trajectories can be long).
const maxLine = 64 << 20

// Load reads a JSONL tasks file: one Task object a line; blank lines are
// ignored. Every bad line (malformed JSON, unknown or wrongly typed field,
// missing task, unknown fixture, bad golden message, duplicate id) is a
// *LineError naming the file, line and field. A task without an id gets
// "<file base name>:<line>".
func Load(path string, opts LoadOptions) ([]Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	defer f.Close()
	return Read(f, path, opts)
}

// Read is Load on an open reader; name is used in errors and default ids.
func Read(r io.Reader, name string, opts LoadOptions) ([]Task, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		tasks   []Task
		skipped []*LineError
		ids     = map[string]int{}
	)
	base := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if err == io.EOF && line == nil {
			break
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("load tasks: %s:%d: %w", name, lineNo, err)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			t, field, perr := parseLine(line, opts)
			if perr == nil {
				if t.ID == "" {
					t.ID = base + ":" + strconv.Itoa(lineNo)
				}
				if prev, dup := ids[t.ID]; dup {
					field, perr = "id", fmt.Errorf("duplicate id %q (first on line %d)", t.ID, prev)
				} else {
					ids[t.ID] = lineNo
				}
			}
			if perr != nil {
				le := &LineError{File: name, Line: lineNo, Field: field, Err: perr}
				if !opts.SkipBad {
					return nil, le
				}
				skipped = append(skipped, le)
			} else {
				tasks = append(tasks, t)
			}
		}
		if err == io.EOF {
			break
		}
	}
	if len(skipped) > 0 {
		return tasks, &SkipError{Loaded: len(tasks), Skipped: skipped}
	}
	return tasks, nil
}

// readLine returns one line without its newline; io.EOF with the last
// (possibly empty) line.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxLine)
		}
		switch err {
		case nil:
			return bytes.TrimRight(buf, "\r\n"), nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(buf) == 0 {
				return nil, io.EOF
			}
			return bytes.TrimRight(buf, "\r\n"), io.EOF
		default:
			return nil, err
		}
	}
}

// parseLine decodes and validates one line; on failure it names the field.
func parseLine(line []byte, opts LoadOptions) (Task, string, error) {
	var t Task
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, jsonErrField(err), jsonErrText(err, line)
	}
	if dec.More() {
		return t, "", errors.New("trailing data after the JSON object (one task per line)")
	}
	if strings.TrimSpace(t.Task) == "" {
		return t, "task", errors.New("missing or empty (every line needs a task)")
	}
	for i, a := range t.GroundTruthAssertions {
		if strings.TrimSpace(a) == "" {
			return t, fmt.Sprintf("ground_truth_assertions[%d]", i), errors.New("empty assertion")
		}
	}
	for i, a := range t.StateAssertions {
		if strings.TrimSpace(a) == "" {
			return t, fmt.Sprintf("state_assertions[%d]", i), errors.New("empty assertion")
		}
	}
	for i, a := range t.WitnessSQL {
		if strings.TrimSpace(a) == "" {
			return t, fmt.Sprintf("witness_sql[%d]", i), errors.New("empty statement")
		}
	}
	if opts.Fixtures != nil && t.Fixture != "" {
		if _, ok := opts.Fixtures[t.Fixture]; !ok {
			return t, "fixture", fmt.Errorf("unknown fixture %q (known: %s)", t.Fixture, knownNames(opts.Fixtures))
		}
	}
	for i, m := range t.Golden {
		if field, err := checkMessage(m); err != nil {
			return t, fmt.Sprintf("golden[%d]%s", i, field), err
		}
	}
	if opts.Check != nil {
		if field, err := opts.Check(&t); err != nil {
			return t, field, err
		}
	}
	return t, "", nil
}

func checkMessage(m chat.Message) (string, error) {
	switch m.Role {
	case "system", "user", "assistant", "tool":
	case "":
		return ".role", errors.New("missing role")
	default:
		return ".role", fmt.Errorf("unknown role %q (want system, user, assistant or tool)", m.Role)
	}
	if len(m.ToolCalls) > 0 && m.Role != "assistant" {
		return ".tool_calls", fmt.Errorf("only assistant messages carry tool calls, not %q", m.Role)
	}
	for j, c := range m.ToolCalls {
		if strings.TrimSpace(c.Name) == "" {
			return fmt.Sprintf(".tool_calls[%d].name", j), errors.New("missing tool name")
		}
		if len(c.Arguments) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(c.Arguments, &obj); err != nil || obj == nil {
				return fmt.Sprintf(".tool_calls[%d].arguments", j), errors.New("arguments must be a JSON object")
			}
		}
	}
	return "", nil
}

func knownNames(m map[string]*Fixture) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// jsonErrField extracts the offending field from encoding/json's errors.
func jsonErrField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	const unknown = "json: unknown field "
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		if f, uerr := strconv.Unquote(strings.TrimPrefix(msg, unknown)); uerr == nil {
			return f
		}
	}
	return ""
}

// jsonErrText rewrites encoding/json's errors into line-oriented messages.
func jsonErrText(err error, line []byte) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("malformed JSON at column %d: %v", se.Offset, se)
	case errors.As(err, &te):
		return fmt.Errorf("wrong type: got JSON %s, want %s", te.Value, goTypeName(te.Type.String()))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("malformed JSON: unexpected end of line at column %d", len(line))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errors.New("unknown field")
	}
	return fmt.Errorf("malformed JSON: %w", err)
}

func goTypeName(t string) string {
	switch t {
	case "string":
		return "a string"
	case "[]string":
		return "an array of strings"
	case "[]chat.Message":
		return "an array of messages"
	case "chat.Message":
		return "a message object"
	case "[]chat.Call":
		return "an array of tool calls"
	case "task.Task":
		return "a task object"
	}
	return t
}

// SkippedFile is the file, in a run's output dir, that lists the task lines
// --skip-bad-tasks skipped.
const SkippedFile = "skipped_tasks.txt"

// WriteSkipped writes the skipped task lines to dir/skipped_tasks.txt,
// saying how many tasks were used (nothing when none were skipped).
func WriteSkipped(dir string, skipped []*LineError, used int) error {
	if len(skipped) == 0 || dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d bad task line(s) skipped (--skip-bad-tasks), %d task(s) used:\n", len(skipped), used)
	for _, le := range skipped {
		b.WriteString(le.Error() + "\n")
	}
	return os.WriteFile(filepath.Join(dir, SkippedFile), []byte(b.String()), 0o644)
}

// Listed is the error that fails a run on the bad lines of the tasks file
// at path: every line listed, and how to go on without them.
func (e *SkipError) Listed(path string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d bad line(s) (fix them, or give --skip-bad-tasks to use the %d good task(s)):", path, len(e.Skipped), e.Loaded)
	for _, le := range e.Skipped {
		b.WriteString("\n  " + le.Error())
	}
	return errors.New(b.String())
}
