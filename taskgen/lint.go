package taskgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/sandbox/lint"
	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/task"
)

// linted is one workspace file as the fixture's linter sees it.
type linted struct {
	path string
	res  *lint.Result
}

// lintWorkspace lints every file of the fixture's workspace that a linter
// accepts, against a fork of its database, as run_linter would.
func lintWorkspace(ctx context.Context, fx *task.Fixture, tpl *sqldb.Template, db *sqldb.DB) ([]linted, error) {
	var cmds []lint.Command
	for _, l := range fx.Config.Linters {
		cmds = append(cmds, lint.Command{Pattern: l.Pattern, Argv: l.Command, Timeout: l.Timeout})
	}
	l, err := lint.New(fx.WorkspaceDir, lint.Options{Commands: cmds})
	if err != nil {
		return nil, fmt.Errorf("taskgen: fixture %s: %w", fx.Name, err)
	}
	defer l.Close()
	var out []linted
	err = fs.WalkDir(os.DirFS(fx.WorkspaceDir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		res, err := l.Lint(ctx, p, lint.Databases{Scratch: tpl.Fork, Live: db})
		var re *lint.RefusalError
		switch {
		case errors.As(err, &re):
			return nil // no linter for it
		case err != nil:
			return err
		case res.TimedOut:
			return nil
		}
		out = append(out, linted{path: p, res: res})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("taskgen: fixture %s: lint workspace: %w", fx.Name, err)
	}
	return out, nil
}

// missingName finds the table or column a linter finding says does not exist.
var missingName = regexp.MustCompile(`no such (?:column|table): ([A-Za-z_][A-Za-z0-9_.]*)|(?:column|relation) "([^"]+)" does not exist`)

// saysMissing holds for an answer that says something is missing or wrong.
// The name alone is not an answer to "which name is wrong?": "The loan
// exists." contains "loan" and states the opposite (a SmolLM2 policy was
// credited for it on a held-out task in run 18).
const saysMissing = `answer matches "(?i)(^|[^a-z])(no|not|none|missing|wrong|unknown|invalid|incorrect|nonexistent|absent|lacks|undefined|mismatch(es|ed)?)([^a-z]|$)|n't([^a-z]|$)"`

// lintCands asks about the workspace's files: one that lints clean is an
// ordinary task (run the linter, report that it passes); one that fails on
// a name the database lacks is a lint-first edge case (the answer must name
// what the linter found and say it is missing or wrong).
func (g *gen) lintCands(add func(*cand)) {
	for _, f := range g.lint {
		fw := map[string]string{"f": f.path}
		if f.res.ExitCode == 0 {
			args, _ := json.Marshal(map[string]string{"path": f.path})
			add(&cand{cat: "lint", ok: true,
				texts: fillAll([]string{
					"Run the linter on {f} and tell me whether it passes.",
					"Is {f} in the workspace valid? Check it with the linter.",
					"Check {f} with run_linter.",
				}, fw),
				// exit_code_of, not exit_code: linting another clean file does not answer.
				asserts: []string{`called("` + task.ToolRunLinter + `")`, "exit_code_of(" + strconv.Quote(f.path) + ") == 0"},
				msgs: []chat.Message{
					{Role: "assistant", ToolCalls: []chat.Call{{Name: task.ToolRunLinter, Arguments: json.RawMessage(args)}}},
					{Role: "tool", Name: task.ToolRunLinter, Content: f.res.Text()},
				},
				answer: func(*sqldb.Result) string {
					return g.says(f.path+" passes the linter (exit code 0).", "The linter finds no problems in "+f.path+".")
				},
			})
			continue
		}
		var name string
		for _, fd := range f.res.Findings {
			if m := missingName.FindStringSubmatch(fd.Message); m != nil {
				name = m[1] + m[2]
				break
			}
		}
		if name == "" {
			continue
		}
		add(&cand{cat: "lint-first", ok: true,
			texts: fillAll([]string{
				"Run the linter on {f}. Does it agree with the database? If not, which name is wrong?",
				"Is {f} still valid against the live schema? Lint it and tell me what it refers to that does not exist.",
			}, fw),
			// One assertion for the answer, so that an answer with a negation and no name earns nothing.
			asserts: []string{"exit_code_of(" + strconv.Quote(f.path) + ") != 0", "answer contains " + strconv.Quote(name) + " && " + saysMissing},
		})
	}
}
