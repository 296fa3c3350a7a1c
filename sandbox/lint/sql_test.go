package lint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/internal/pgtest"
	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/task"
)

const fixtureDir = "../../examples/fixtures/customers"

// sqlWorkspace is the customers fixture's workspace plus files that agree or
// disagree with its schema in known ways.
var sqlWorkspace = map[string]string{
	"schema_copy.sql": `-- the fixture's own schema: agrees with the database
CREATE TABLE customers (
    id             INTEGER PRIMARY KEY,
    email          VARCHAR(255) NOT NULL UNIQUE,
    full_name      VARCHAR(120) NOT NULL,
    status         VARCHAR(20),
    account_status VARCHAR(20) NOT NULL DEFAULT 'open',
    is_active      BOOLEAN NOT NULL DEFAULT TRUE,
    country        CHAR(2),
    created_at     DATE NOT NULL,
    last_login_at  DATE
);
CREATE INDEX customers_status_idx ON customers (status);
`,
	"drift.sql": `CREATE TABLE IF NOT EXISTS customers (
    id             INTEGER PRIMARY KEY,
    email          VARCHAR(255) NOT NULL UNIQUE,
    full_name      VARCHAR(120) NOT NULL,
    status         VARCHAR(30) NOT NULL,
    account_status VARCHAR(20) NOT NULL DEFAULT 'open',
    is_active      BOOLEAN NOT NULL DEFAULT TRUE,
    country        CHAR(2),
    created_at     DATE NOT NULL,
    nickname       VARCHAR(40)
);
`,
	"new_table.sql": "SELECT 1;\n\nCREATE TABLE audit_log (id INTEGER PRIMARY KEY, note TEXT);\n",
	"alter.sql":     "-- adds a column the live table lacks\nALTER TABLE customers ADD COLUMN vip BOOLEAN;\n",
	"escape.sql":    "SELECT 1;\nATTACH DATABASE '/tmp/x.db' AS x;\n",
	"comments.sql":  "-- nothing but a comment\n",
}

func sqlFixture(t *testing.T) *task.Fixture {
	t.Helper()
	fx, err := task.LoadFixture(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// sqlLinter copies the fixture's workspace and sqlWorkspace into a temp dir.
func sqlLinter(t *testing.T, fx *task.Fixture) *Linter {
	t.Helper()
	files := map[string]string{}
	for k, v := range sqlWorkspace {
		files[k] = v
	}
	entries, err := os.ReadDir(fx.WorkspaceDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(fx.WorkspaceDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return newLinter(t, workspace(t, files), Options{})
}

func TestSQLSQLite(t *testing.T) { testSQL(t, "") }

func TestSQLPostgres(t *testing.T) { testSQL(t, pgtest.DSN(t)) }

func testSQL(t *testing.T, dsn string) {
	ctx := context.Background()
	fx := sqlFixture(t)
	tmpl, err := sqldb.NewTemplate(ctx, fx.SchemaSQL, fx.DataSQL, sqldb.Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmpl.Close() })
	live, err := tmpl.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	l := sqlLinter(t, fx)
	dbs := Databases{Scratch: tmpl.Fork, Live: live}

	type want struct {
		line     int
		contains string
		col      int // 0: no column expected
	}
	cases := []struct {
		path  string
		exit  int
		wants []want
	}{
		{"inactive_customers.sql", 0, nil},
		{"schema_copy.sql", 0, nil},
		{"comments.sql", 0, nil},
		{"cleanup_inactive.sql", 1, []want{{5, "customer_status", 7}, {7, "customer", 8}, {9, "", 0}}},
		{"drift.sql", 1, []want{
			{1, "customers.last_login_at exists in the live database but not in this file", 0},
			{5, "customers.status has type", 0},
			{10, "customers.nickname is not in the live database", 0},
		}},
		{"new_table.sql", 1, []want{{3, "table audit_log does not exist in the live database", 0}}},
		{"alter.sql", 1, []want{{2, "customers.vip", 0}}},
		{"escape.sql", 1, []want{{2, "", 0}}},
	}
	for _, c := range cases {
		res, err := l.Lint(ctx, c.path, dbs)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if res.ExitCode != c.exit || len(res.Findings) != len(c.wants) {
			t.Errorf("%s: exit %d with %d findings, want %d with %d:\n%s", c.path, res.ExitCode, len(res.Findings), c.exit, len(c.wants), res.Text())
			continue
		}
		for i, w := range c.wants {
			f := res.Findings[i]
			if f.Line != w.line || !strings.Contains(f.Message, w.contains) || (w.col > 0 && f.Column != w.col) {
				t.Errorf("%s: finding %d = %+v, want line %d column %d containing %q", c.path, i, f, w.line, w.col, w.contains)
			}
		}
	}
	// The scratch copy takes the file's changes, the trajectory's database never.
	if _, err := l.Lint(ctx, "alter.sql", dbs); err != nil {
		t.Fatal(err)
	}
	tables, err := live.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		for _, col := range tb.Columns {
			if col.Name == "vip" {
				t.Errorf("linting changed the live database: %s.vip", tb.Name)
			}
		}
	}

	// Schema integrity is checked against the live database: once the
	// trajectory alters it, a file that agreed with the fixture no longer does.
	if _, err := live.Query(ctx, "ALTER TABLE customers ADD COLUMN churn_score INTEGER"); err != nil {
		t.Fatal(err)
	}
	res, err := l.Lint(ctx, "inactive_customers.sql", dbs)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 || len(res.Findings) != 1 || !strings.Contains(res.Findings[0].Message, "customers.churn_score") {
		t.Errorf("after ALTER in the live database: %s", res.Text())
	}
}
