package lint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mcprl/mcprl/sandbox/sqldb"
)

// Default limits.
const (
	DefaultTimeout        = 10 * time.Second
	DefaultMaxOutputBytes = 64 << 10
	DefaultMaxFileBytes   = 1 << 20
	// ExitTimeout is the exit code reported when an external linter ran past its timeout.
	ExitTimeout = 124
)

// Command is an external linter: argv run for files matching Pattern.
type Command struct {
	// Pattern is a path.Match pattern tried on the workspace-relative path
	// and on its base name (so "*.py" matches "src/app.py").
	Pattern string
	// Argv is the command; the argument "{path}" is replaced by the
	// workspace-relative path, and when no argument contains it the path is
	// appended. A relative Argv[0] with a slash is resolved in the workspace.
	Argv []string
	// Timeout bounds one run (DefaultTimeout when zero); the whole process
	// group is killed when it passes.
	Timeout time.Duration
}

// Options configures a Linter.
type Options struct {
	Commands       []Command
	MaxOutputBytes int // cap on an external linter's captured output (DefaultMaxOutputBytes when zero)
	MaxFileBytes   int // largest file the built-in linters read (DefaultMaxFileBytes when zero)
}

// Linter lints files of one workspace. It is safe for concurrent use.
type Linter struct {
	dir  string   // absolute workspace directory ("" when the fixture has none)
	root *os.Root // nil when there is no workspace
	opts Options
}

// New returns a Linter for the workspace directory dir. dir may be "" for a
// fixture without a workspace: every Lint is then refused.
func New(dir string, opts Options) (*Linter, error) {
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	for i, c := range opts.Commands {
		if len(c.Argv) == 0 {
			return nil, fmt.Errorf("lint: command %d (pattern %q) has no argv", i, c.Pattern)
		}
		if _, err := path.Match(c.Pattern, ""); err != nil {
			return nil, fmt.Errorf("lint: command %d: bad pattern %q: %w", i, c.Pattern, err)
		}
	}
	l := &Linter{opts: opts}
	if dir == "" {
		return l, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("lint: workspace %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("lint: opening workspace: %w", err)
	}
	l.dir, l.root = abs, root
	return l, nil
}

// Close releases the workspace handle.
func (l *Linter) Close() error {
	if l.root == nil {
		return nil
	}
	return l.root.Close()
}

// Dir returns the absolute workspace directory ("" when there is none).
func (l *Linter) Dir() string { return l.dir }

// RefusalError says why a path or request was refused; its message is meant
// for the model.
type RefusalError struct {
	Path   string
	Reason string
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("run_linter refused %q: %s", e.Path, e.Reason)
}

// Finding is one problem a linter reported.
type Finding struct {
	Line    int    `json:"line"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

// Result is the outcome of linting one file.
type Result struct {
	Path     string    `json:"path"`
	Linter   string    `json:"linter"`
	ExitCode int       `json:"exit_code"`
	Findings []Finding `json:"findings"`
	// Output is an external linter's combined stdout and stderr.
	Output    string `json:"output,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
}

// Text renders the result for the model: one "path:line:col: message" per
// finding, the output of an external linter, and the exit code.
func (r *Result) Text() string {
	var b strings.Builder
	if r.Output != "" { // an external linter's own words (its findings were parsed from them)
		b.WriteString(r.Output)
		if !strings.HasSuffix(r.Output, "\n") {
			b.WriteByte('\n')
		}
	} else {
		for _, f := range r.Findings {
			if f.Column > 0 {
				fmt.Fprintf(&b, "%s:%d:%d: %s\n", r.Path, f.Line, f.Column, f.Message)
			} else {
				fmt.Fprintf(&b, "%s:%d: %s\n", r.Path, f.Line, f.Message)
			}
		}
	}
	if r.Truncated {
		b.WriteString("(output truncated)\n")
	}
	if r.TimedOut {
		b.WriteString("(linter timed out and was killed)\n")
	}
	if r.ExitCode == 0 && len(r.Findings) == 0 && r.Output == "" {
		fmt.Fprintf(&b, "%s: no problems found (%s)\n", r.Path, r.Linter)
	}
	fmt.Fprintf(&b, "exit code %d", r.ExitCode)
	return b.String()
}

// Databases gives the SQL linter what it checks a file against.
type Databases struct {
	// Scratch returns a throwaway fork of the fixture's database that the
	// file's statements are applied to; the linter closes it.
	Scratch func(ctx context.Context) (*sqldb.DB, error)
	// Live is the trajectory's own database, whose schema the file must agree with.
	Live *sqldb.DB
}

// Lint lints the workspace file at rel. A refused path or unsupported file is
// a *RefusalError; any other error is an infrastructure failure.
func (l *Linter) Lint(ctx context.Context, rel string, dbs Databases) (*Result, error) {
	clean, err := l.check(rel)
	if err != nil {
		return nil, err
	}
	for _, c := range l.opts.Commands {
		if matches(c.Pattern, clean) {
			return l.runCommand(ctx, c, clean)
		}
	}
	switch strings.ToLower(path.Ext(clean)) {
	case ".sql":
		src, err := l.read(clean)
		if err != nil {
			return nil, err
		}
		return lintSQL(ctx, clean, src, dbs)
	case ".json":
		src, err := l.read(clean)
		if err != nil {
			return nil, err
		}
		return lintJSON(clean, src), nil
	case ".yaml", ".yml":
		src, err := l.read(clean)
		if err != nil {
			return nil, err
		}
		return lintYAML(clean, src), nil
	}
	return nil, &RefusalError{Path: rel, Reason: "no linter for this kind of file (" + l.supported() + ")"}
}

func (l *Linter) supported() string {
	kinds := []string{"*.sql", "*.json", "*.yaml", "*.yml"}
	for _, c := range l.opts.Commands {
		kinds = append(kinds, c.Pattern)
	}
	sort.Strings(kinds)
	return "supported: " + strings.Join(kinds, ", ")
}

func matches(pattern, rel string) bool {
	if ok, _ := path.Match(pattern, rel); ok {
		return true
	}
	ok, _ := path.Match(pattern, path.Base(rel))
	return ok
}

// check validates rel as a workspace-relative path to a regular file and
// returns its clean form.
func (l *Linter) check(rel string) (string, error) {
	refuse := func(reason string) (string, error) { return "", &RefusalError{Path: rel, Reason: reason} }
	if l.root == nil {
		return refuse("this sandbox has no workspace")
	}
	if rel == "" {
		return refuse("the path is empty; give a file path relative to the workspace, e.g. \"schema.sql\"")
	}
	if strings.ContainsRune(rel, 0) {
		return refuse("the path contains a NUL byte")
	}
	if strings.Contains(rel, `\`) {
		return refuse(`use forward slashes in paths`)
	}
	if path.IsAbs(rel) || filepath.IsAbs(rel) {
		return refuse("absolute paths are not allowed; give a path relative to the workspace")
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return refuse(`".." is not allowed; the path must stay inside the workspace`)
		}
	}
	clean := path.Clean(rel)
	// os.Root follows symlinks only while they stay inside the workspace.
	fi, err := l.root.Stat(clean)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return refuse("no such file in the workspace")
		case strings.Contains(err.Error(), "escapes"):
			return refuse("the path leads outside the workspace (symlink)")
		}
		return refuse("cannot access the file: " + stripPath(err, l.dir))
	}
	if fi.IsDir() {
		return refuse("is a directory; give a file")
	}
	if !fi.Mode().IsRegular() {
		return refuse("not a regular file")
	}
	return clean, nil
}

// stripPath keeps host paths out of messages the model reads.
func stripPath(err error, dir string) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return strings.ReplaceAll(err.Error(), dir, "workspace")
}

func (l *Linter) read(rel string) ([]byte, error) {
	f, err := l.root.Open(rel)
	if err != nil {
		return nil, &RefusalError{Path: rel, Reason: "cannot open the file: " + stripPath(err, l.dir)}
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, int64(l.opts.MaxFileBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("lint: reading %s: %w", rel, err)
	}
	if len(src) > l.opts.MaxFileBytes {
		return nil, &RefusalError{Path: rel, Reason: fmt.Sprintf("file larger than %d bytes", l.opts.MaxFileBytes)}
	}
	return src, nil
}
