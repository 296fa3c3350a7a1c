"""Writes tasks.jsonl for the customers fixture (python3 gen_tasks.py > tasks.jsonl).

The first task is the user's own, verbatim from their description (system_prompt, task,
ground_truth_assertions). Each task has a golden trajectory. The tool observations of
query_database calls are left empty here and filled in from the real database by
`go test ./task -run TestExampleTasks -update` (which, without -update, checks them);
run_linter observations are the linter's output, copied from a run.
"""
import json

SEED_SYSTEM = ("You are a Model Context Protocol reasoning agent. You have access to the following MCP tools:\n"
               "- name: query_database\n  inputSchema: {\"sql\": {\"type\": \"string\"}}\n"
               "- name: run_linter\n  inputSchema: {\"path\": {\"type\": \"string\"}}")

LINT_CLEAN = "inactive_customers.sql: no problems found (sql)\nexit code 0"
LINT_BROKEN = ("cleanup_inactive.sql:3: SQL error: SQL logic error: no such column: customer_status\n"
               "cleanup_inactive.sql:7: SQL error: SQL logic error: no such table: customer\n"
               "cleanup_inactive.sql:9: SQL error: SQL logic error: near \"FROM\": syntax error\n"
               "exit code 1")


def q(sql, say=""):
    return [{"role": "assistant", "content": say, "tool_calls": [{"name": "query_database", "arguments": {"sql": sql}}]},
            {"role": "tool", "name": "query_database", "content": ""}]


def lint(path, out, say=""):
    return [{"role": "assistant", "content": say, "tool_calls": [{"name": "run_linter", "arguments": {"path": path}}]},
            {"role": "tool", "name": "run_linter", "content": out}]


def answer(text):
    return [{"role": "assistant", "content": text}]


def clean(msgs):
    for m in msgs:
        if not m.get("content"):
            if m["role"] == "assistant":
                m.pop("content", None)
    return msgs


tasks = [
    {
        "id": "customers-inactive-001",
        "system_prompt": SEED_SYSTEM,
        "task": "Find all inactive customer records in postgres and verify schema integrity.",
        "ground_truth_assertions": ["SELECT COUNT(*) FROM customers WHERE status = 'inactive'", "exit_code == 0"],
        "fixture": "customers",
        "category": "seed",
        "golden": q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'",
                    "First I count the customers whose status is exactly 'inactive'.")
        + q("SELECT id, email, full_name, status FROM customers WHERE LOWER(TRIM(status)) = 'inactive' ORDER BY id",
            "Status values may differ in case or spacing, so I also list every variant.")
        + lint("inactive_customers.sql", LINT_CLEAN, "Now I check that the workspace query agrees with the live schema.")
        + answer("7 customers have status exactly 'inactive'. Counting case and spacing variants "
                 "('Inactive', 'INACTIVE', ' inactive', 'inactive ') there are 13 inactive customer records: "
                 "ids 2, 8, 9, 12, 13, 14, 16, 19, 20, 25, 27, 30 and 36. "
                 "Schema integrity: inactive_customers.sql agrees with the live schema (linter exit code 0)."),
    },
    {
        "id": "customers-inactive-variants-002",
        "task": "How many customers are inactive if you ignore letter case and surrounding spaces in the status column?",
        "ground_truth_assertions": ["SELECT COUNT(*) FROM customers WHERE LOWER(TRIM(status)) = 'inactive'"],
        "fixture": "customers",
        "category": "sql-read",
        "golden": q("SELECT COUNT(*) FROM customers WHERE LOWER(TRIM(status)) = 'inactive'")
        + answer("13 customers are inactive when case and surrounding spaces are ignored."),
    },
    {
        "id": "customers-null-status-003",
        "task": "Which customers have no status recorded at all? Give their ids and emails.",
        "ground_truth_assertions": ["SELECT id, email FROM customers WHERE status IS NULL ORDER BY id"],
        "fixture": "customers",
        "category": "sql-read",
        "golden": q("SELECT id, email FROM customers WHERE status IS NULL ORDER BY id")
        + answer("3 customers have no status: 6 (KEN.THOMPSON@EXAMPLE.COM), 31 (lynn.conway@example.com) "
                 "and 34 (james.gosling@example.com)."),
    },
    {
        "id": "customers-normalize-status-004",
        "task": "Normalize the status column so that every variant of 'inactive' (any letter case, stray spaces) "
                "becomes exactly 'inactive', then report how many inactive customers there are.",
        "ground_truth_assertions": ["SELECT COUNT(*) FROM customers WHERE status = 'inactive'"],
        # The change the task asks for, checked on the database afterwards: every variant became
        # 'inactive', and nothing else was lost (36 customers, 40 orders, 7 exact ones before).
        "state_assertions": ["SELECT COUNT(*) = 13 FROM customers WHERE status = 'inactive'",
                             "SELECT COUNT(*) = 0 FROM customers WHERE LOWER(TRIM(status)) = 'inactive' AND status <> 'inactive'",
                             "SELECT (SELECT COUNT(*) FROM customers) = 36 AND (SELECT COUNT(*) FROM orders) = 40"],
        "fixture": "customers",
        "category": "sql-write",
        "golden": q("UPDATE customers SET status = 'inactive' WHERE LOWER(TRIM(status)) = 'inactive' AND status <> 'inactive'")
        + q("SELECT COUNT(*) FROM customers WHERE status = 'inactive'")
        + answer("I normalized 6 status values; 13 customers now have status exactly 'inactive'."),
    },
    {
        "id": "customers-lint-broken-005",
        "task": "Check whether cleanup_inactive.sql agrees with the database schema and explain what is wrong with it.",
        "ground_truth_assertions": ["exit_code != 0", "called(\"run_linter\")"],
        "fixture": "customers",
        "category": "lint",
        "golden": lint("cleanup_inactive.sql", LINT_BROKEN)
        + q("SELECT * FROM customers LIMIT 0", "I look at the real columns of customers.")
        + answer("cleanup_inactive.sql does not agree with the schema (linter exit code 1): line 3 filters on "
                 "customer_status, which does not exist (the column is status); line 7 updates a table named "
                 "customer, but the table is customers; line 9 is missing the closing parenthesis in COUNT(*)."),
    },
    {
        "id": "customers-inactive-orders-006",
        "task": "What is the total value of the orders placed by customers whose status is any form of 'inactive'? Round to cents.",
        "ground_truth_assertions": ["SELECT ROUND(SUM(o.total), 2) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE LOWER(TRIM(c.status)) = 'inactive'"],
        "fixture": "customers",
        "category": "sql-read",
        "golden": q("SELECT ROUND(SUM(o.total), 2) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE LOWER(TRIM(c.status)) = 'inactive'")
        + answer("Orders of inactive customers total 3915.7."),
    },
    {
        "id": "customers-orphan-orders-007",
        "task": "Verify referential integrity: are there orders whose customer does not exist?",
        "ground_truth_assertions": ["SELECT COUNT(*) FROM orders o LEFT JOIN customers c ON c.id = o.customer_id WHERE c.id IS NULL"],
        # Its answer is 0: a copy with one orphaned order tells the honest query from SELECT 0 (the foreign key
        # dropped on PostgreSQL; SQLite defers it on such a copy, and the ALTER fails there, which is skipped).
        "witness_sql": ["ALTER TABLE orders DROP CONSTRAINT orders_customer_id_fkey",
                        "UPDATE orders SET customer_id = -1 WHERE id = (SELECT MIN(id) FROM orders)"],
        "fixture": "customers",
        "category": "integrity",
        "golden": q("SELECT COUNT(*) FROM orders o LEFT JOIN customers c ON c.id = o.customer_id WHERE c.id IS NULL")
        + answer("There are 0 orphaned orders: every order references an existing customer."),
    },
    {
        "id": "customers-flag-mismatch-008",
        "task": "Find customers whose is_active flag is true even though their status is some form of 'inactive'.",
        "ground_truth_assertions": ["SELECT id FROM customers WHERE is_active = TRUE AND LOWER(TRIM(status)) = 'inactive' ORDER BY id"],
        "fixture": "customers",
        "category": "integrity",
        "golden": q("SELECT id FROM customers WHERE is_active = TRUE AND LOWER(TRIM(status)) = 'inactive' ORDER BY id")
        + answer("Two customers are flagged active although their status is a form of 'inactive': ids 14 and 20."),
    },
]

for t in tasks:
    t["golden"] = clean(t["golden"])
    print(json.dumps(t, ensure_ascii=False))
