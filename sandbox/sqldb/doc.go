// Package sqldb runs the query_database tool: a fixture's database built
// once as a Template, then forked per trajectory so that concurrent
// trajectories never see each other's changes, with the policy's untrusted
// SQL confined. Two backends build from the same fixture SQL: embedded
// SQLite (modernc.org/sqlite, the default) and PostgreSQL (jackc/pgx,
// selected by a DSN).
//
// SQLite forks deserialize a serialized image of the template into a fresh
// private in-memory connection; a fork of a fork copies its parent with
// SQLite's online backup, inside SQLite's heap. PostgreSQL forks take a pooled connection
// and a private copy of the fixture's tables (a schema "slot", built once and
// reused), inside a transaction that is rolled back at Close.
package sqldb
