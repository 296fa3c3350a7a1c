// Package lint implements run_linter: it lints one file of a fixture's
// workspace and reports findings with line numbers and a real exit code
// (0 clean, non-zero with findings).
//
// Paths come from the policy and are untrusted: only relative paths that
// stay inside the workspace are accepted (no "..", no absolute paths, no
// symlink that leads out; the file is opened through an [os.Root]). Every
// refusal is a [*RefusalError] whose message the model reads.
//
// Built-in linters cover SQL (each statement must parse and apply to a scratch
// copy of the fixture's database, and the tables the file creates or touches
// must agree with the live schema), JSON and YAML. A fixture's sandbox.yaml
// may add external commands per file pattern; they run as subprocesses in
// the workspace with a timeout, a minimal environment and capped output.
package lint
