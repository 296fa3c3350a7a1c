// Package sqldb runs the query_database tool: a fixture's database built
// once as a Template, then forked per trajectory so that concurrent
// trajectories never see each other's changes, with the policy's untrusted
// SQL confined. Two backends build from the same fixture SQL: embedded
// SQLite (modernc.org/sqlite, the default) and PostgreSQL (jackc/pgx,
// selected by a DSN).
//
// SQLite forks deserialize a serialized image of the template into a fresh
// private in-memory connection. PostgreSQL forks take a pooled connection
// and a private copy of the fixture's tables (a schema "slot", built once and
// reused), inside a transaction that is rolled back at Close.
package sqldb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Options configures a Template and its forks.
type Options struct {
	// DSN selects the backend: "" is embedded SQLite; a postgres:// or
	// postgresql:// URL (or a key=value DSN with host=) is PostgreSQL.
	DSN string
	// StatementTimeout limits one Query call (default DefaultStatementTimeout).
	StatementTimeout time.Duration
	// MaxRows and MaxBytes cap what one Query returns (defaults
	// DefaultMaxRows, DefaultMaxBytes); beyond them the result is cut and
	// marked Truncated.
	MaxRows, MaxBytes int
}

// Defaults for zero Options fields.
const (
	DefaultStatementTimeout = 5 * time.Second
	DefaultMaxRows          = 1000
	DefaultMaxBytes         = 1 << 20
)

func (o Options) withDefaults() Options {
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return o
}

// IsPostgres reports whether dsn selects the PostgreSQL backend.
func IsPostgres(dsn string) bool {
	d := strings.TrimSpace(dsn)
	return strings.HasPrefix(d, "postgres://") || strings.HasPrefix(d, "postgresql://") ||
		strings.Contains(d, "host=") || strings.Contains(d, "dbname=")
}

// QueryError is the model-readable failure of one Query: a refusal by the
// confinement, a SQL error, or a timeout. Its message is meant to be shown
// to the policy as the tool's error text.
type QueryError struct {
	Kind ErrorKind
	Msg  string
	Err  error // the underlying driver error, if any
}

// ErrorKind classifies a QueryError.
type ErrorKind string

// Kinds of QueryError.
const (
	KindRefused ErrorKind = "refused" // the confinement refused the statement
	KindSQL     ErrorKind = "sql"     // the database rejected the statement
	KindTimeout ErrorKind = "timeout" // the per-call time limit ran out
)

func (e *QueryError) Error() string { return e.Msg }
func (e *QueryError) Unwrap() error { return e.Err }

func refused(format string, args ...any) *QueryError {
	return &QueryError{Kind: KindRefused, Msg: "refused: " + fmt.Sprintf(format, args...)}
}

// ErrClosed is returned by calls on a closed DB or Template.
var ErrClosed = errors.New("sqldb: closed")

// Table is one table of the live schema.
type Table struct {
	Name    string   `json:"name"`
	Columns []Column `json:"columns"`
}

// Column is one column of a Table. Type is as the database reports it
// (SQLite: the declared type, e.g. "VARCHAR(20)"; PostgreSQL: format_type,
// e.g. "character varying(20)").
type Column struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	NotNull    bool   `json:"not_null"`
	PrimaryKey bool   `json:"primary_key,omitempty"`
}

// backend is one database engine's template.
type backend interface {
	fork(ctx context.Context) (forkConn, error)
	close() error
}

// forkConn is one fork's private database state.
type forkConn interface {
	query(ctx context.Context, sql string, lim limits) (*Result, error)
	oracle(ctx context.Context, sql string, lim limits) (*Result, error)
	tables(ctx context.Context) ([]Table, error)
	close() error
}

type limits struct {
	timeout           time.Duration
	maxRows, maxBytes int
}

// Template is a fixture's database, prepared once; Fork gives each
// trajectory its own copy. A Template is safe for concurrent use.
type Template struct {
	opts Options
	be   backend

	mu     sync.Mutex
	forks  map[*DB]struct{}
	closed bool
}

// NewTemplate builds the database from schemaSQL then dataSQL (trusted
// fixture SQL, possibly many statements each) on the backend opts.DSN selects.
func NewTemplate(ctx context.Context, schemaSQL, dataSQL string, opts Options) (*Template, error) {
	opts = opts.withDefaults()
	var (
		be  backend
		err error
	)
	if opts.DSN == "" {
		be, err = newSQLiteTemplate(ctx, schemaSQL, dataSQL)
	} else if IsPostgres(opts.DSN) {
		be, err = newPGTemplate(ctx, schemaSQL, dataSQL, opts)
	} else {
		return nil, fmt.Errorf("sqldb: unsupported DSN %q (want \"\" for SQLite or a postgres:// URL)", redact(opts.DSN))
	}
	if err != nil {
		return nil, err
	}
	return &Template{opts: opts, be: be, forks: map[*DB]struct{}{}}, nil
}

// Backend names the template's engine: "sqlite" or "postgres".
func (t *Template) Backend() string {
	if t.opts.DSN == "" {
		return "sqlite"
	}
	return "postgres"
}

// Fork returns a private copy of the template's database for one trajectory.
func (t *Template) Fork(ctx context.Context) (*DB, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	t.mu.Unlock()
	fc, err := t.be.fork(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqldb: fork: %w", err)
	}
	db := &DB{t: t, fc: fc, lim: limits{timeout: t.opts.StatementTimeout, maxRows: t.opts.MaxRows, maxBytes: t.opts.MaxBytes}}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		fc.close()
		return nil, ErrClosed
	}
	t.forks[db] = struct{}{}
	t.mu.Unlock()
	return db, nil
}

// Close closes every open fork and releases the template (connections,
// schemas, roles' grants, memory). It is idempotent.
func (t *Template) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	open := make([]*DB, 0, len(t.forks))
	for db := range t.forks {
		open = append(open, db)
	}
	t.mu.Unlock()
	var errs []error
	for _, db := range open {
		if err := db.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := t.be.close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// DB is one trajectory's private database. Calls are serialized; a DB is
// safe for concurrent use but runs one statement at a time.
type DB struct {
	t   *Template
	lim limits

	mu     sync.Mutex
	fc     forkConn
	closed bool
}

// Query runs one statement of untrusted SQL from the policy, confined. A
// refusal, SQL error or timeout is a *QueryError (its message is for the
// model); any other error is an infrastructure failure.
func (d *DB) Query(ctx context.Context, sql string) (*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	return d.fc.query(ctx, sql, d.lim)
}

// Oracle runs trusted read-only SQL (a reward assertion) against this
// fork's current state, without the policy's confinement; it cannot change
// the fork's state. Its results are capped like Query's.
func (d *DB) Oracle(ctx context.Context, sql string) (*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	return d.fc.oracle(ctx, sql, d.lim)
}

// Tables returns the fork's live schema: its tables and columns, sorted by
// table name, columns in declaration order.
func (d *DB) Tables(ctx context.Context) ([]Table, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	return d.fc.tables(ctx)
}

// Close discards the fork's state and releases its resources. It is idempotent.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	err := d.fc.close()
	d.mu.Unlock()
	d.t.mu.Lock()
	delete(d.t.forks, d)
	d.t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("sqldb: close fork: %w", err)
	}
	return nil
}

// callCtx derives the per-call context and a function that tells whether
// an error is this call's own timeout (as opposed to the caller's cancel).
func callCtx(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, timeout, errCallTimeout)
}

var errCallTimeout = errors.New("per-call time limit")

// timedOut reports whether cctx ended by its own per-call limit.
func timedOut(cctx context.Context) bool {
	return errors.Is(context.Cause(cctx), errCallTimeout)
}

func timeoutError(d time.Duration, err error) *QueryError {
	return &QueryError{Kind: KindTimeout, Msg: fmt.Sprintf("query timed out: it ran longer than the %s limit per call and was cancelled", d), Err: err}
}

func redact(dsn string) string {
	if i := strings.Index(dsn, "@"); i > 0 {
		if j := strings.Index(dsn, "://"); j >= 0 && j < i {
			return dsn[:j+3] + "…" + dsn[i:]
		}
	}
	return dsn
}
