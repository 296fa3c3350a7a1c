package look_test

import (
	"fmt"
	"testing"

	"github.com/mcprl/mcprl/look"
)

func ExampleBefore() {
	say, sql, _ := look.Before("SELECT COUNT(*) FROM customers WHERE status = 'active'")
	fmt.Println(say)
	fmt.Println(sql)
	// Output:
	// First I look at the values status takes in customers.
	// SELECT DISTINCT status FROM customers ORDER BY status
}

func ExampleAfter() {
	empty, _ := look.After("SELECT COUNT(*) FROM customers WHERE status = 'ACTIVE'", "(0 rows)", false)
	missingColumn, _ := look.After("SELECT COUNT(*) FROM customers WHERE signup_date > '2024-01-01'", "SQL error: no such column: signup_date", true)
	missingTable, _ := look.After("SELECT COUNT(*) FROM purchases", "SQL error: no such table: purchases", true)
	fmt.Println(empty)
	fmt.Println(missingColumn)
	fmt.Println(missingTable)
	// Output:
	// SELECT DISTINCT status FROM customers ORDER BY status LIMIT 20
	// SELECT * FROM customers LIMIT 1
	// SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name
}

func TestBefore(t *testing.T) {
	for _, c := range []struct{ query, say, sql string }{
		{`SELECT name FROM customers ORDER BY name`, "First I look at a few rows of customers to see its columns.", "SELECT * FROM customers LIMIT 3"},
		{`SELECT COUNT(*) FROM "order items" WHERE "unit price" > 3`, "First I look at a few rows of order items to see its columns.", `SELECT * FROM "order items" LIMIT 3`},
		{`select count(*) from orders where LOWER(TRIM(state)) = 'shipped'`, "First I look at the values state takes in orders.", "SELECT DISTINCT state FROM orders ORDER BY state"},
		{`SELECT c.name FROM orders AS o JOIN customers AS c ON c.id = o.customer_id WHERE c.country = 'FR'`, "First I look at the values country takes in customers.", "SELECT DISTINCT country FROM customers ORDER BY country"},
		{`SELECT COUNT(*) FROM customers WHERE email IS NULL`, "First I look at the values email takes in customers.", "SELECT DISTINCT email FROM customers ORDER BY email"},
	} {
		say, sql, ok := look.Before(c.query)
		if !ok || say != c.say || sql != c.sql {
			t.Errorf("Before(%q) = %q, %q, %v; want %q, %q", c.query, say, sql, ok, c.say, c.sql)
		}
	}
	// An alias it cannot resolve, or no table at all: no look.
	for _, q := range []string{`SELECT 1`, `SELECT x.a FROM t x WHERE x.a = 1`, `garbage`} {
		if say, sql, ok := look.Before(q); ok {
			t.Errorf("Before(%q) = %q, %q; want no look", q, say, sql)
		}
	}
}

func TestAfter(t *testing.T) {
	for _, c := range []struct {
		query, obs string
		failed     bool
		want       string
	}{
		{`SELECT * FROM loans WHERE checked_out > '2024'`, `SQL error: ERROR: relation "loans" does not exist (SQLSTATE 42P01)`, true, look.PostgresTables},
		{`SELECT COUNT(*) FROM orders WHERE state = 'Shipped'`, `SQL error: no such column: state`, true, "SELECT * FROM orders LIMIT 1"},
		{`SELECT COUNT(*) FROM orders WHERE state = 'SHIPPED'`, "", false, "SELECT DISTINCT state FROM orders ORDER BY state LIMIT 20"},
		{`SELECT name FROM customers ORDER BY name`, "", false, "SELECT * FROM customers LIMIT 1"},
	} {
		got, ok := look.After(c.query, c.obs, c.failed)
		if !ok || got != c.want {
			t.Errorf("After(%q, %q, %v) = %q, %v; want %q", c.query, c.obs, c.failed, got, ok, c.want)
		}
	}
	if got, ok := look.After(`SELECT 1 +`, "SQL error: incomplete input", true); ok {
		t.Errorf("After of a query with no table = %q, want no look", got)
	}
}
