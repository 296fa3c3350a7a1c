package sqldb_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcprl/mcprl/sandbox/sqldb"
)

// A template is built once per fixture; each trajectory forks it, changes
// its own copy, and closes it.
func ExampleTemplate_Fork() {
	ctx := context.Background()
	schema := "CREATE TABLE customers (id INTEGER PRIMARY KEY, status VARCHAR(20));"
	data := "INSERT INTO customers VALUES (1, 'active'), (2, 'inactive'), (3, 'Inactive'), (4, NULL);"
	tpl, err := sqldb.NewTemplate(ctx, schema, data, sqldb.Options{}) // DSN "": embedded SQLite
	if err != nil {
		panic(err)
	}
	defer tpl.Close()

	a, _ := tpl.Fork(ctx)
	b, _ := tpl.Fork(ctx)
	res, _ := a.Query(ctx, "DELETE FROM customers WHERE LOWER(status) = 'inactive'")
	fmt.Println(res.Text())
	res, _ = a.Query(ctx, "SELECT COUNT(*) AS n FROM customers")
	fmt.Println(res.Text())
	res, _ = b.Query(ctx, "SELECT id, status FROM customers ORDER BY id") // b does not see a's DELETE
	fmt.Println(res.Text())
	a.Close()
	b.Close()
	// Output:
	// OK: 2 row(s) affected
	// n
	// -
	// 2
	// (1 row)
	// id | status
	// ---+---------
	// 1  | active
	// 2  | inactive
	// 3  | Inactive
	// 4  | NULL
	// (4 rows)
}

// The policy's SQL is confined; refusals and SQL errors are QueryErrors
// whose message is meant for the model.
func ExampleDB_Query_refused() {
	ctx := context.Background()
	tpl, _ := sqldb.NewTemplate(ctx, "CREATE TABLE t (a INTEGER);", "", sqldb.Options{})
	defer tpl.Close()
	db, _ := tpl.Fork(ctx)
	defer db.Close()
	for _, sql := range []string{"ATTACH 'other.db' AS o", "SELECT b FROM t"} {
		_, err := db.Query(ctx, sql)
		var qe *sqldb.QueryError
		if errors.As(err, &qe) {
			fmt.Printf("[%s] %s\n", qe.Kind, qe)
		}
	}
	// Output:
	// [refused] refused: ATTACH is not allowed: the database is the only one this tool can use
	// [sql] SQL error: SQL logic error: no such column: b
}
