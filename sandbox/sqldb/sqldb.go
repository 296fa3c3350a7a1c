package sqldb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mcprl/mcprl/sandbox/sqllex"
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
	// marked Truncated. Column names count towards MaxBytes.
	MaxRows, MaxBytes int
	// MaxMemory bounds the memory one fork's statements may take (default
	// DefaultMaxMemory). SQLite: how much the fork's in-memory database may
	// grow beyond the fixture (its max_page_count). PostgreSQL: the
	// temporary files of one statement (temp_file_limit, when the DSN's
	// user may set it) and a quarter of it for sorts and hashes (work_mem).
	// A statement that needs more is refused with a QueryError.
	MaxMemory int64
	// MaxTotalMemory bounds the memory of every SQLite fork of the
	// process together (default DefaultMaxTotalMemory): SQLite's hard
	// heap limit, which is process-wide, so the largest value any
	// template asked for holds. Past it a statement is refused, and the
	// process lives on however many sessions try. MaxMemory bounds one
	// statement's working memory (sorts, DISTINCT) within it.
	MaxTotalMemory int64
	// Logger receives warnings: a fork that lost its connection and was
	// replaced, a limit the server does not let the DSN's user set
	// (discarded when nil).
	Logger *slog.Logger
}

// Defaults for zero Options fields.
const (
	DefaultStatementTimeout = 5 * time.Second
	DefaultMaxRows          = 1000
	DefaultMaxBytes         = 1 << 20
	DefaultMaxMemory        = 32 << 20
	DefaultMaxTotalMemory   = 2 << 30
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
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.MaxTotalMemory <= 0 {
		o.MaxTotalMemory = DefaultMaxTotalMemory
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
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
	// KindLost: the fork's database session was lost (a connection that
	// died) and the fork was replaced by a fresh copy of the fixture, so
	// the changes made before are gone. The statement may or may not have
	// run.
	KindLost ErrorKind = "lost"
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
	dialect() sqllex.Dialect
}

// forkConn is one fork's private database state.
type forkConn interface {
	query(ctx context.Context, sql string, lim limits) (*Result, error)
	oracle(ctx context.Context, sql string, lim limits) (*Result, error)
	tables(ctx context.Context) ([]Table, error)
	// variant runs the oracle and the queries on the data as ch changes
	// it, then restores it (DB.Variants, DB.Witnessed).
	variant(ctx context.Context, ch change, oracle string, queries []string, lim limits) ([]*Result, error)
	// snapshot makes a new fork holding this fork's current state; writes
	// are the statements that changed it, in order (PostgreSQL replays
	// them).
	snapshot(ctx context.Context, writes []string, lim limits) (forkConn, error)
	// lost is non-nil once the fork's state is gone (its connection died):
	// it can serve no more calls and must be replaced.
	lost() error
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

	ref pristine // the fixture as built, for oracles (fixture.go)
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
		be, err = newSQLiteTemplate(ctx, schemaSQL, dataSQL, opts.MaxMemory, opts.MaxTotalMemory, opts.Logger)
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
	return t.adopt(fc, nil)
}

// adopt registers a new fork's state as a DB of the template.
func (t *Template) adopt(fc forkConn, writes []string) (*DB, error) {
	db := &DB{t: t, fc: fc, lim: t.limits(), writes: writes}
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

// OpenForks returns how many forks of the template are open.
func (t *Template) OpenForks() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.forks)
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
	if err := t.closeRefs(); err != nil {
		errs = append(errs, err)
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

	mu       sync.Mutex
	fc       forkConn
	closed   bool
	lostWhy  error    // the first loss of the fork's state, if any
	replaced int      // how many times fc was replaced
	writes   []string // the policy's statements that changed the data or the schema, in order
}

// Dialect is the SQL dialect of the database (SQLite or PostgreSQL).
func (d *DB) Dialect() sqllex.Dialect { return d.t.be.dialect() }

// Query runs one statement of untrusted SQL from the policy, confined. A
// refusal, SQL error or timeout is a *QueryError (its message is for the
// model); any other error is an infrastructure failure.
//
// When the fork's database session is lost (PostgreSQL: the connection
// died, for instance cut by a deadline in the middle of a statement), the
// fork is replaced by a fresh copy of the fixture and the call that found
// it lost returns a QueryError of KindLost saying so; Lost then reports it.
func (d *DB) Query(ctx context.Context, sql string) (*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	if why := d.fc.lost(); why != nil {
		// Lost by an earlier call that the caller abandoned.
		return nil, d.replace(ctx, why, nil)
	}
	res, err := d.fc.query(ctx, sql, d.lim)
	if why := d.fc.lost(); why != nil {
		return nil, d.replace(ctx, why, err)
	}
	if err == nil && (res.RowsAffected > 0 || changesSchema(sql, d.Dialect())) {
		d.writes = append(d.writes, sql)
	}
	return res, err
}

// Fork returns a new fork holding this fork's state as it is now (a fork
// of a fork: a trajectory branched at a turn). The two are isolated both
// ways: neither sees the other's later changes. The new fork's Writes
// start from this one's. SQLite copies the database (an online backup into
// a new private connection, in SQLite's own heap); PostgreSQL starts a
// fresh copy of the fixture and runs this fork's writing statements again.
func (d *DB) Fork(ctx context.Context) (*DB, error) { return d.branch(ctx, false) }

// Snapshot returns a new fork holding this fork's state as it is now, as
// Fork does, for a state kept to be forked later (a branching point that
// may wait long, or never be used). On PostgreSQL it holds no connection
// and no slot schema until its first call, which takes them and runs the
// writing statements again (what Fork does at once); a Fork of it does the
// same at once. So snapshots that pile up take no slots: only forks in use
// do. SQLite copies the database at once, as Fork.
func (d *DB) Snapshot(ctx context.Context) (*DB, error) { return d.branch(ctx, true) }

// parker is a fork whose state can be kept as its writing statements alone
// (PostgreSQL), to be run again when first used.
type parker interface {
	park(writes []string, lim limits) forkConn
}

func (d *DB) branch(ctx context.Context, lazy bool) (*DB, error) {
	d.mu.Lock()
	if err := d.ready(ctx); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	if d.lostWhy != nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("sqldb: fork of a fork: the parent's state was lost (%v)", d.lostWhy)
	}
	writes := append([]string(nil), d.writes...)
	var fc forkConn
	var err error
	if p, ok := d.fc.(parker); ok && lazy {
		fc = p.park(writes, d.lim)
	} else {
		fc, err = d.fc.snapshot(ctx, writes, d.lim)
	}
	d.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("sqldb: fork of a fork: %w", err)
	}
	return d.t.adopt(fc, writes)
}

// Writes counts the policy's statements that changed this fork's data
// (rows inserted, updated or deleted, triggers included) or its schema
// (CREATE, ALTER, DROP, TRUNCATE). A reward reads it to see a write the
// task did not ask for.
func (d *DB) Writes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.writes)
}

// Template returns the template the fork was made from: its Oracle and
// Variants read the fixture as it was built.
func (d *DB) Template() *Template { return d.t }

// Lost reports why the fork's state was lost and replaced, the first time
// it happened, or nil if it never was. A trajectory whose fork was lost saw
// its database reset in the middle.
func (d *DB) Lost() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lostWhy
}

// replace discards the lost fork and forks a fresh one. err is what the
// call that lost it returned. The result is the error for that call.
func (d *DB) replace(ctx context.Context, why, err error) error {
	if d.lostWhy == nil {
		d.lostWhy = why
	}
	d.fc.close()
	msg := "the database session was lost"
	var qe *QueryError
	if errors.As(err, &qe) {
		msg = qe.Msg + "; " + msg
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// The caller gave up: replace the fork on its next call.
		d.fc = lostFork{why}
		return ctx.Err()
	}
	// Replacing must not fail for want of the caller's remaining time.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	fc, ferr := d.t.be.fork(rctx)
	if ferr != nil {
		d.fc = lostFork{why}
		d.t.opts.Logger.Warn("sqldb: fork lost and could not be replaced", "backend", d.t.Backend(), "reason", why, "err", ferr)
		return fmt.Errorf("sqldb: %s (%v) and a new fork failed: %w", msg, why, ferr)
	}
	d.fc = fc
	d.replaced++
	d.t.opts.Logger.Warn("sqldb: fork lost its database session; replaced by a fresh copy of the fixture", "backend", d.t.Backend(), "reason", why, "replacements", d.replaced)
	return &QueryError{Kind: KindLost, Err: why, Msg: msg +
		", so the database was reset to its initial state: changes made earlier in this episode are gone (run the statement again if it is still needed)"}
}

// ensure replaces a lost fork before a trusted call (Oracle, Tables).
func (d *DB) ensure(ctx context.Context) error {
	why := d.fc.lost()
	if why == nil {
		return nil
	}
	var qe *QueryError
	if err := d.replace(ctx, why, nil); !errors.As(err, &qe) {
		return err
	}
	return nil
}

// lostFork stands for a fork whose state is gone and whose replacement
// has not been made yet.
type lostFork struct{ why error }

func (l lostFork) query(context.Context, string, limits) (*Result, error) { return nil, l.err() }
func (l lostFork) oracle(context.Context, string, limits) (*Result, error) {
	return nil, l.err()
}
func (l lostFork) tables(context.Context) ([]Table, error) { return nil, l.err() }
func (l lostFork) variant(context.Context, change, string, []string, limits) ([]*Result, error) {
	return nil, l.err()
}
func (l lostFork) snapshot(context.Context, []string, limits) (forkConn, error) {
	return nil, l.err()
}
func (l lostFork) lost() error  { return l.why }
func (l lostFork) close() error { return nil }
func (l lostFork) err() error   { return fmt.Errorf("sqldb: fork lost: %w", l.why) }

// Oracle runs trusted read-only SQL (a reward assertion) against this
// fork's current state, without the policy's confinement; it cannot change
// the fork's state. Its results are capped like Query's.
func (d *DB) Oracle(ctx context.Context, sql string) (*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	return d.fc.oracle(ctx, sql, d.lim)
}

// ready reports whether the fork can serve a trusted call (d.mu held): not
// closed, and replaced if its state was lost.
func (d *DB) ready(ctx context.Context) error {
	if d.closed {
		return ErrClosed
	}
	return d.ensure(ctx)
}

// Tables returns the fork's live schema: its tables and columns, sorted by
// table name, columns in declaration order.
func (d *DB) Tables(ctx context.Context) ([]Table, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(ctx); err != nil {
		return nil, err
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

// budget is how long one statement may run: the statement timeout, or the
// time left before the caller's deadline when that comes first.
func budget(ctx context.Context, timeout time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < timeout {
			return left
		}
	}
	return timeout
}

// deadlineHit reports whether ctx ended by its deadline (not a cancel).
func deadlineHit(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// timedOut reports whether cctx ended by its own per-call limit.
func timedOut(cctx context.Context) bool {
	return errors.Is(context.Cause(cctx), errCallTimeout)
}

func timeoutError(d time.Duration, err error) *QueryError {
	return &QueryError{Kind: KindTimeout, Msg: fmt.Sprintf("query timed out: it ran longer than the %s limit per call and was cancelled", d.Round(10*time.Millisecond)), Err: err}
}

// memoryError is the refusal of a statement that needed more than the
// fork's memory allows.
func memoryError(max int64, what string, err error) *QueryError {
	return &QueryError{Kind: KindRefused, Err: err, Msg: fmt.Sprintf(
		"refused: the statement needed more than the %s this sandbox allows %s; it was rolled back. Work on fewer or smaller rows.", formatBytes(max), what)}
}

// formatBytes writes n as MiB or KiB when it is a whole number of them.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func redact(dsn string) string {
	if i := strings.Index(dsn, "@"); i > 0 {
		if j := strings.Index(dsn, "://"); j >= 0 && j < i {
			return dsn[:j+3] + "…" + dsn[i:]
		}
	}
	return dsn
}
