-- oddities fixture: awkward shapes for the task generator's robustness test
-- (package taskgen): a table named with an SQL keyword, a self-referencing
-- foreign key, a table without a primary key, timestamps rather than
-- dates, values with apostrophes and ampersands, REAL amounts, an empty
-- table. Portable SQL: runs unchanged on SQLite and PostgreSQL.

CREATE TABLE employees (
    id         INTEGER PRIMARY KEY,
    full_name  VARCHAR(60) NOT NULL,
    dept       VARCHAR(20),
    manager_id INTEGER REFERENCES employees (id),
    hired      DATE NOT NULL,
    salary     NUMERIC(9, 2) NOT NULL
);

CREATE TABLE "order" (
    id          INTEGER PRIMARY KEY,
    employee_id INTEGER NOT NULL REFERENCES employees (id),
    amount      REAL NOT NULL,
    note        VARCHAR(80)
);

CREATE TABLE audit_log (
    logged_at TIMESTAMP NOT NULL,
    action    VARCHAR(20) NOT NULL
);

CREATE TABLE archive (
    id    INTEGER PRIMARY KEY,
    label VARCHAR(20)
);
