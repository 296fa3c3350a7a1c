package sqldb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fixtureSQL reads the example fixture the package is built for.
func fixtureSQL(t testing.TB) (schema, data string) {
	t.Helper()
	dir := filepath.Join("..", "..", "examples", "fixtures", "customers")
	s, err := os.ReadFile(filepath.Join(dir, "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.ReadFile(filepath.Join(dir, "data.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return string(s), string(d)
}

func newTemplate(t testing.TB, dsn string, opts Options) *Template {
	t.Helper()
	schema, data := fixtureSQL(t)
	opts.DSN = dsn
	tpl, err := NewTemplate(context.Background(), schema, data, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tpl.Close() })
	return tpl
}

func TestSQLiteSmoke(t *testing.T) {
	tpl := newTemplate(t, "", Options{})
	ctx := context.Background()
	db, err := tpl.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Query(ctx, "SELECT COUNT(*) FROM customers WHERE status = 'inactive'")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Text())
	res, err = db.Query(ctx, "SELECT * FROM customers ORDER BY id LIMIT 3")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Text(), res.Rows)
	res, err = db.Query(ctx, "DELETE FROM orders WHERE customer_id < 10")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Text())
	for _, q := range []string{"ATTACH ':memory:' AS x", "PRAGMA writable_schema=1", "SELECT load_extension('x')", "VACUUM INTO '/tmp/x.db'", "SELEC 1", "SELECT 1; SELECT 2"} {
		_, err := db.Query(ctx, q)
		var qe *QueryError
		t.Logf("%s -> %v (%v)", q, err, errors.As(err, &qe))
	}
	tabs, err := db.Tables(ctx)
	t.Log(tabs, err)
	res, err = db.Oracle(ctx, "SELECT COUNT(*) FROM orders")
	t.Log(res, err)
	_, err = db.Oracle(ctx, "DELETE FROM orders")
	t.Log(err)
}
