package reward

import (
	"fmt"

	"github.com/expr-lang/expr"

	"github.com/mcprl/mcprl/sandbox/sqllex"
	"github.com/mcprl/mcprl/task"
)

// CheckAssertion reports what keeps an assertion from being scored, as far
// as it shows without a database: an expression assertion (anything but a
// SELECT or WITH query) must compile, as Assertions compiles it; a SQL one
// must lex (no unterminated string, identifier or comment). Whether the
// query runs on its fixture shows only when it runs.
func CheckAssertion(src string) error {
	if IsSQL(src) {
		if _, err := sqllex.Split(src, sqllex.Options{Dialect: sqllex.SQLite}); err != nil {
			return fmt.Errorf("SQL assertion does not parse: %w", err)
		}
		return nil
	}
	if _, err := expr.Compile(src, expr.Env(Facts{}), expr.AsBool()); err != nil {
		return fmt.Errorf("expression assertion does not compile (a SQL assertion starts with SELECT or WITH): %w", err)
	}
	return nil
}

// CheckTask is CheckAssertion on each of t's ground_truth_assertions and
// state_assertions (which must be queries), and a lexer's check of its
// witness_sql, naming the first that fails; it serves as
// task.LoadOptions.Check, so that a broken assertion is a bad line of its
// tasks file.
func CheckTask(t *task.Task) (field string, err error) {
	for i, a := range t.GroundTruthAssertions {
		if err := CheckAssertion(a); err != nil {
			return fmt.Sprintf("ground_truth_assertions[%d]", i), err
		}
	}
	for i, a := range t.StateAssertions {
		// A state assertion is always a query (its first row's cells must
		// be true).
		if !IsSQL(a) {
			return fmt.Sprintf("state_assertions[%d]", i), fmt.Errorf("state assertion %q is not a SELECT or WITH query", a)
		}
		if err := CheckAssertion(a); err != nil {
			return fmt.Sprintf("state_assertions[%d]", i), err
		}
	}
	for i, a := range t.WitnessSQL {
		if _, err := sqllex.Split(a, sqllex.Options{Dialect: sqllex.SQLite}); err != nil {
			return fmt.Sprintf("witness_sql[%d]", i), fmt.Errorf("statement does not parse: %w", err)
		}
	}
	return "", nil
}
