package sqldb

import (
	"context"
	"testing"

	"github.com/mcprl/mcprl/internal/pgtest"
)

func TestPGSmoke(t *testing.T) {
	tpl := newTemplate(t, pgtest.DSN(t), Options{})
	ctx := context.Background()
	db, err := tpl.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"SELECT COUNT(*) FROM customers WHERE status = 'inactive'", "SELECT * FROM customers ORDER BY id LIMIT 3", "DELETE FROM orders WHERE customer_id < 10",
		"SET ROLE mcprl", "COMMIT", "SELECT set_config('role','mcprl',true)", "COPY customers TO '/tmp/x'", "SELECT pg_read_file('/etc/passwd')", "SELECT pg_sleep(10)", "SELECT 1/0", "SELECT * FROM pg_authid", "CREATE TABLE x(a int)"} {
		res, err := db.Query(ctx, q)
		if err != nil {
			t.Logf("%s -> %T %v", q, err, err)
			continue
		}
		t.Log(q, "\n", res.Text())
	}
	tabs, err := db.Tables(ctx)
	t.Log(tabs, err)
	res, err := db.Oracle(ctx, "SELECT COUNT(*) FROM orders")
	t.Log(res, err)
	res, err = db.Oracle(ctx, "DELETE FROM orders")
	t.Log(res, err)
	res, err = db.Oracle(ctx, "SELECT COUNT(*) FROM orders")
	t.Log(res, err)
}
