package sqldb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/internal/pgtest"
)

type escape struct {
	name, sql string
	want      string // substring of the refusal message
}

// sqliteEscapes are attempts to leave the fork's private in-memory database.
func sqliteEscapes(dir string) []escape {
	file := filepath.Join(dir, "escape.db")
	return []escape{
		{"attach", "ATTACH DATABASE '" + file + "' AS x", "ATTACH is not allowed"},
		{"attach lower case after comment", "/* hi */ attach '" + file + "' as x", "ATTACH is not allowed"},
		{"attach memory", "ATTACH ':memory:' AS x", "ATTACH is not allowed"},
		{"attach uri", "ATTACH 'file:" + file + "?mode=rwc' AS x", "ATTACH is not allowed"},
		{"detach", "DETACH DATABASE main", "DETACH is not allowed"},
		{"load_extension", "SELECT load_extension('libc.so.6')", "load_extension() is not allowed"},
		{"load_extension mixed case", "select LOAD_EXTENSION('/tmp/x')", "is not allowed"},
		{"load_extension quoted", `SELECT "load_extension"('/tmp/x')`, "is not allowed"},
		{"vacuum into", "VACUUM INTO '" + file + "'", "VACUUM is not allowed"},
		{"vacuum into after comment", "-- tidy up\n  vacuum main into '" + file + "'", "VACUUM is not allowed"},
		{"pragma writable_schema", "PRAGMA writable_schema = ON", "PRAGMA writable_schema is not allowed"},
		{"pragma journal_mode", "PRAGMA journal_mode = DELETE", "is not allowed"},
		{"pragma temp_store_directory", "PRAGMA temp_store_directory = '" + dir + "'", "is not allowed"},
		{"pragma foreign_keys off", "PRAGMA foreign_keys = OFF", "is not allowed"},
		{"pragma trusted_schema", "PRAGMA trusted_schema = ON", "is not allowed"},
		{"pragma mmap_size", "pragma main.mmap_size=268435456", "is not allowed"},
		{"pragma function read", "SELECT * FROM pragma_journal_mode", "PRAGMA journal_mode is not allowed"},
		{"pragma function in a subquery", "SELECT (SELECT foreign_keys FROM pragma_foreign_keys)", "PRAGMA foreign_keys is not allowed"},
		// Pragma functions cannot set values: SQLite itself rejects these.
		{"pragma function setting journal_mode", "SELECT * FROM pragma_journal_mode('off')", "SQL error"},
		{"pragma function setting writable_schema", "SELECT * FROM pragma_writable_schema(1)", "SQL error"},
		{"pragma function temp_store_directory", "SELECT * FROM pragma_temp_store_directory('" + dir + "')", "SQL error"},
		{"second statement", "SELECT 1; ATTACH ':memory:' AS x", "2 statements"},
		{"second statement after comment", "SELECT 1 -- ;\n; VACUUM INTO '" + file + "'", "2 statements"},
		{"virtual table", "CREATE VIRTUAL TABLE v USING fts5(body)", "virtual tables are not allowed"},
		{"empty", "  -- nothing\n ; ", "empty SQL"},
		{"temp table shadowing a fixture table", "CREATE TEMP TABLE customers AS SELECT * FROM customers WHERE 0", "temporary tables"},
		{"temp view", "CREATE TEMPORARY VIEW orders AS SELECT 1 AS id", "temporary tables"},
		// Spelled temp.X, the TEMP keyword's action codes are not raised:
		// the database name must be refused too.
		{"temp.X view shadowing a fixture table", "CREATE VIEW temp.customers AS SELECT 'inactive' AS status WHERE 0", "temporary tables"},
		{"temp.X table", "CREATE TABLE temp.t (x)", "temporary tables"},
		{"temp.X table as select", "CREATE TABLE temp.big AS SELECT zeroblob(1000) FROM customers", "temporary tables"},
		{"temp.X trigger on main", "CREATE TRIGGER temp.t AFTER INSERT ON main.orders BEGIN DELETE FROM main.customers; END", "temporary tables"},
		{"temp.X index (SQLite refuses it itself)", "CREATE INDEX temp.i ON customers (status)", "SQL error"},
		{"quoted temp", `CREATE VIEW "temp"."customers" AS SELECT 1`, "temporary tables"},
	}
}

// pgEscapes are attempts to leave the unprivileged role, the fork's
// transaction, or the database.
var pgEscapes = []escape{
	{"set role", "SET ROLE mcprl", "SET is not allowed"},
	{"set role lower", "set role none", "SET is not allowed"},
	{"reset role", "RESET ROLE", "RESET is not allowed"},
	{"set session authorization", "SET SESSION AUTHORIZATION mcprl", "SET is not allowed"},
	{"set statement_timeout", "SET statement_timeout = 0", "SET is not allowed"},
	{"commit", "COMMIT", "transaction control (COMMIT)"},
	{"end", "END", "transaction control (END)"},
	{"rollback", "ROLLBACK", "transaction control (ROLLBACK)"},
	{"abort", "ABORT", "transaction control"},
	{"begin", "BEGIN", "transaction control"},
	{"start transaction", "START TRANSACTION", "transaction control"},
	{"savepoint", "SAVEPOINT x", "transaction control"},
	{"release the sandbox's savepoint", "RELEASE SAVEPOINT mcprl_q", "transaction control"},
	{"rollback to the sandbox's savepoint", "ROLLBACK TO SAVEPOINT mcprl_q", "transaction control"},
	{"prepare transaction", "PREPARE TRANSACTION 'x'", "transaction control"},
	{"commit after comment", "/* nested /* comment */ still */ commit", "transaction control"},
	{"second statement", "SELECT 1; COMMIT", "2 statements"},
	{"copy to file", "COPY customers TO '/tmp/mcprl-escape.csv'", "COPY is not allowed"},
	{"copy to program", "COPY (SELECT 1) TO PROGRAM 'id'", "COPY is not allowed"},
	{"copy from program", "copy customers from program 'cat /etc/passwd'", "COPY is not allowed"},
	{"pg_read_file", "SELECT pg_read_file('/etc/passwd')", "pg_read_file is not allowed"},
	{"pg_read_binary_file", "SELECT pg_catalog.pg_read_binary_file('/etc/passwd')", "is not allowed"},
	{"pg_ls_dir", "SELECT * FROM pg_ls_dir('.')", "pg_ls_dir is not allowed"},
	{"pg_stat_file", "SELECT pg_stat_file('postgresql.conf')", "pg_stat_file is not allowed"},
	{"lo_import", "SELECT lo_import('/etc/passwd')", "lo_import is not allowed"},
	{"lo_export", "SELECT lo_export(1, '/tmp/x')", "lo_export is not allowed"},
	{"set_config role", "SELECT set_config('role', 'mcprl', false)", "set_config is not allowed"},
	{"set_config quoted", `SELECT "set_config"('role', 'mcprl', true)`, "set_config is not allowed"},
	{"set_config qualified upper", `SELECT PG_CATALOG.SET_CONFIG('statement_timeout', '0', true)`, "set_config is not allowed"},
	{"set_config unicode escape", `SELECT U&"\0073et_config"('role', 'mcprl', true)`, "Unicode-escaped identifiers"},
	{"update pg_settings", "UPDATE pg_settings SET setting = 'mcprl' WHERE name = 'role'", "pg_settings is not allowed"},
	{"query_to_xml", "SELECT query_to_xml('SELECT set_config(''role'', ''mcprl'', true)', true, true, '')", "query_to_xml is not allowed"},
	{"ts_stat", "SELECT * FROM ts_stat('SELECT 1')", "ts_stat is not allowed"},
	{"do block", "DO $$ BEGIN PERFORM 1; END $$", "DO statements are not allowed"},
	{"create function", "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", "CREATE FUNCTION is not allowed"},
	{"create or replace function", "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$BEGIN RETURN 1; END$$", "CREATE FUNCTION is not allowed"},
	{"create procedure", "create procedure p() language sql as 'select 1'", "CREATE PROCEDURE is not allowed"},
	{"create trigger", "CREATE TRIGGER t BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION f()", "CREATE TRIGGER is not allowed"},
	{"create rule", "CREATE RULE r AS ON INSERT TO orders DO INSTEAD NOTHING", "CREATE RULE is not allowed"},
	{"create extension", "CREATE EXTENSION dblink", "CREATE EXTENSION is not allowed"},
	{"create schema", "CREATE SCHEMA x", "CREATE SCHEMA is not allowed"},
	{"alter system", "ALTER SYSTEM SET log_statement = 'none'", "ALTER SYSTEM is not allowed"},
	{"alter role", "ALTER ROLE mcprl_policy SUPERUSER", "ALTER ROLE is not allowed"},
	{"drop schema", "DROP SCHEMA public CASCADE", "DROP SCHEMA is not allowed"},
	{"alter table owner", "ALTER TABLE orders OWNER TO mcprl", "must be"},
	{"call", "CALL p()", "CALL statements are not allowed"},
	{"advisory lock", "SELECT pg_advisory_lock(42)", "pg_advisory_lock is not allowed"},
	{"terminate backend", "SELECT pg_terminate_backend(pg_backend_pid())", "pg_terminate_backend is not allowed"},
	{"listen", "LISTEN x", "LISTEN statements are not allowed"},
	{"grant", "GRANT pg_read_server_files TO mcprl_policy", "GRANT statements are not allowed"},
	// What the lexer passes is still confined by the role's privileges.
	{"read pg_authid", "SELECT rolpassword FROM pg_authid", "permission denied"},
	{"other schema", "SELECT * FROM pg_catalog.pg_statistic", "permission denied"},
}

// isRefusal: a refusal containing want, or (want "SQL error") a SQL error.
func isRefusal(err error, want string) bool {
	var qe *QueryError
	if !errors.As(err, &qe) {
		return false
	}
	if want == "SQL error" {
		return qe.Kind == KindSQL
	}
	return qe.Kind == KindRefused && strings.Contains(qe.Error(), want)
}

func TestSQLiteConfinement(t *testing.T) {
	dir := t.TempDir()
	tpl := newTemplate(t, "", Options{})
	db := fork(t, tpl)
	for _, e := range sqliteEscapes(dir) {
		t.Run(e.name, func(t *testing.T) {
			_, err := db.Query(context.Background(), e.sql)
			if !isRefusal(err, e.want) {
				t.Errorf("%s: got %v, want a refusal containing %q", e.sql, err, e.want)
			}
		})
	}
	// A trigger cannot smuggle a denied function past the authorizer: it
	// is authorized when the statement that fires it compiles.
	query(t, db, "CREATE TRIGGER smuggle AFTER INSERT ON orders BEGIN SELECT load_extension('/tmp/x'); END")
	if _, err := db.Query(context.Background(), "INSERT INTO orders (id, customer_id, total, placed_at) VALUES (500, 1, 1, '2025-01-01')"); !isRefusal(err, "load_extension") {
		t.Errorf("trigger firing load_extension: got %v", err)
	}
	// Defence in depth: even past the lexical check, the engine refuses
	// VACUUM INTO (it attaches its target, which the authorizer denies).
	out := filepath.Join(dir, "vacuum.db")
	if _, err := db.fc.(*sqliteFork).run(context.Background(), "VACUUM INTO '"+out+"'", db.lim); !isRefusal(err, "ATTACH is not allowed") {
		t.Errorf("VACUUM INTO past the lexer: %v", err)
	}
	// Values are bounded: no gigabyte allocations.
	var qe *QueryError
	if _, err := db.Query(context.Background(), "SELECT length(zeroblob(1000000000))"); !errors.As(err, &qe) || qe.Kind != KindSQL || !strings.Contains(err.Error(), "too big") {
		t.Errorf("zeroblob(1e9): got %v", err)
	}
	// Schema-reading PRAGMAs are allowed (the task asks to verify schema integrity).
	for _, ok := range []string{"PRAGMA table_info(customers)", "PRAGMA foreign_key_list(orders)", "PRAGMA foreign_key_check", "PRAGMA integrity_check", "SELECT * FROM pragma_table_info('orders')"} {
		if _, err := db.Query(context.Background(), ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// No file appeared, and the fork still works.
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files written: %v", entries)
	}
	if got := scalar(t, db, "SELECT COUNT(*) FROM customers"); got != int64(36) {
		t.Errorf("customers = %v", got)
	}
}

func TestPostgresConfinement(t *testing.T) {
	tpl := newTemplate(t, pgtest.DSN(t), Options{})
	db := fork(t, tpl)
	ctx := context.Background()
	query(t, db, "DELETE FROM orders WHERE id <= 10")
	for _, e := range pgEscapes {
		t.Run(e.name, func(t *testing.T) {
			_, err := db.Query(ctx, e.sql)
			if !isRefusal(err, e.want) {
				t.Errorf("%s: got %v, want a refusal containing %q", e.sql, err, e.want)
			}
		})
	}
	// Text that only looks dangerous inside strings, dollar quotes and
	// comments is one harmless statement, and runs.
	for sql, want := range map[string]any{
		"SELECT $$; COMMIT; $$":                       "; COMMIT; ",
		"SELECT $tag$ SET ROLE mcprl $tag$":           " SET ROLE mcprl ",
		`SELECT E'\'; COMMIT; --'`:                    "'; COMMIT; --",
		"SELECT 'a;b' -- ; COMMIT\n":                  "a;b",
		"SELECT 1 /* ; COMMIT /* nested */ ; */":      int64(1),
		`SELECT 'set_config' AS "note"`:               "set_config",
		"SELECT COUNT(*) FROM orders":                 int64(30),
		"SELECT current_user":                         PolicyRole,
		"SELECT current_setting('statement_timeout')": "5s",
	} {
		res, err := db.Query(ctx, sql)
		if err != nil {
			t.Errorf("%s: %v", sql, err)
			continue
		}
		if got := res.Rows[0][0]; got != want {
			t.Errorf("%s = %#v, want %#v", sql, got, want)
		}
	}
	// A temporary table cannot shadow a fixture table (pg_temp is searched last).
	query(t, db, "SELECT 1 AS id INTO TEMP customers")
	if got := scalar(t, db, "SELECT COUNT(*) FROM customers"); got != int64(36) {
		t.Errorf("a temp table shadows customers: count %v", got)
	}
	if res, err := db.Oracle(ctx, "SELECT COUNT(*) FROM customers"); err != nil || res.Rows[0][0] != int64(36) {
		t.Errorf("a temp table shadows customers for the oracle: %v %v", res, err)
	}
	// Schema changes of the fork's own tables are allowed, and private.
	for _, ddl := range []string{
		"CREATE TABLE audit (id INTEGER PRIMARY KEY, note TEXT)",
		"ALTER TABLE customers ADD COLUMN vip BOOLEAN",
		"CREATE INDEX orders_state_idx ON orders (state)",
		"DROP TABLE orders",
		"TRUNCATE audit",
	} {
		query(t, db, ddl)
	}
	// The oracle runs as the policy role too.
	if res, err := db.Oracle(ctx, "SELECT current_user"); err != nil || res.Rows[0][0] != PolicyRole {
		t.Errorf("oracle role: %v %v", res, err)
	}
	// The role's privileges are the last line: another fork's slot is out of reach.
	other := fork(t, tpl)
	pf := other.fc.(*pgFork)
	if _, err := db.Query(ctx, "SELECT COUNT(*) FROM "+quoteIdent(pf.slot)+".customers"); !isRefusal(err, "permission denied") {
		t.Errorf("reading another fork's slot: %v", err)
	}
	if got := scalar(t, other, "SELECT COUNT(*) FROM orders"); got != int64(40) {
		t.Errorf("other fork sees %v orders", got)
	}
	// A gigantic row is refused before it is read into memory; that costs
	// the connection, so the fork is replaced by a fresh copy and says so.
	_, err := db.Query(ctx, "SELECT repeat('x', 20000000)")
	var qe *QueryError
	if !errors.As(err, &qe) || qe.Kind != KindLost || !strings.Contains(qe.Error(), "larger than") || !strings.Contains(qe.Error(), "initial state") {
		t.Errorf("20 MB row: %v", err)
	}
	if db.Lost() == nil {
		t.Errorf("Lost() = nil after the session was lost")
	}
	if got := scalar(t, db, "SELECT COUNT(*) FROM orders"); got != int64(40) {
		t.Errorf("the replaced fork has %v orders, want the fixture's 40 (orders was dropped before)", got)
	}
	db.Close()
	next := fork(t, tpl)
	tabs, err := next.Tables(ctx)
	if err != nil || len(tabs) != 2 || len(tabs[0].Columns) != 9 || tabs[1].Name != "orders" {
		t.Errorf("a later fork sees the schema changes: %+v %v", tabs, err)
	}
}
