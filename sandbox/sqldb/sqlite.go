package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/mcprl/mcprl/sandbox/sqllex"
	"modernc.org/sqlite"
)

// sqliteDSN opens a private in-memory database in defensive mode (no
// writable_schema tricks, no corrupting the file format).
const sqliteDSN = ":memory:?_defensive=1"

// sqliteConn is what the modernc driver's connections offer beyond driver.Conn.
type sqliteConn interface {
	driver.Conn
	driver.ExecerContext
	driver.QueryerContext
	sqlite.AuthorizerRegisterer
	Serialize() ([]byte, error)
	Deserialize([]byte) error
	NewBackup(dstURI string) (*sqlite.Backup, error)
}

// A fork of a fork is made with SQLite's online backup: the parent's pages
// are copied, inside SQLite's own heap, into a new private in-memory
// connection, and nothing of the database passes through the Go heap (a
// Serialize would copy it into a new Go slice per fork, garbage the
// collector then has to sweep: the tail of a fork's latency). The modernc
// driver's Backup opens that destination connection itself, so
// sqliteConnector hands it to database/sql: t.db.Conn, given a context
// that carries a *sqliteBackup, makes its new connection the backup's
// destination instead of an empty one. Nothing else of the fork changes:
// open configures it like any other. The driver opens the destination
// with the DSN alone, without the functions, collations, connection hooks
// and virtual table modules registered on its Driver (Driver.Open adds
// them); sqldb registers none.

// sqliteBackup asks sqliteConnector for a copy of src; made is the
// connection it returned, which database/sql must hand back (a check that
// nothing else answered the request).
type sqliteBackup struct {
	src  sqliteConn
	made driver.Conn
}

type sqliteBackupKey struct{}

// sqliteConnector opens the template's connections: an empty private
// in-memory database, or the copy a *sqliteBackup in the context asks for.
type sqliteConnector struct{ driver.Connector }

func (c sqliteConnector) Connect(ctx context.Context) (driver.Conn, error) {
	b, _ := ctx.Value(sqliteBackupKey{}).(*sqliteBackup)
	if b == nil {
		return c.Connector.Connect(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bk, err := b.src.NewBackup(sqliteDSN)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if _, err := bk.Step(-1); err != nil {
		bk.Finish() // closes the destination
		return nil, fmt.Errorf("backup: %w", err)
	}
	dc, err := bk.Commit()
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	b.made = dc
	return dc, nil
}

// sqliteMaxLength bounds one string or blob value (SQLITE_LIMIT_LENGTH):
// zeroblob(1e9) and the like fail instead of allocating a gigabyte.
const sqliteMaxLength = 16 << 20

// SQLite limit ids (sqlite3.h SQLITE_LIMIT_*).
const (
	sqliteLimitLength   = 0
	sqliteLimitAttached = 7
)

type sqliteTemplate struct {
	db       *sql.DB // opens a fresh private in-memory connection per fork
	image    []byte  // the serialized template database
	maxPages int64   // a fork's max_page_count: the template's pages and maxMemory more
	maxMem   int64
}

// sqliteFull is SQLITE_FULL, the error of a write past max_page_count;
// sqliteNoMem is SQLITE_NOMEM, an allocation past the process's hard heap
// limit.
const (
	sqliteFull  = 13
	sqliteNoMem = 7
)

func newSQLiteTemplate(ctx context.Context, schemaSQL, dataSQL string, maxMemory, maxTotal int64, logger *slog.Logger) (*sqliteTemplate, error) {
	if err := enableHeapAccounting(); err != nil {
		logger.Warn("sqldb: sqlite: statements' memory is not bounded", "err", err)
	} else {
		raiseHeapLimit(maxTotal)
	}
	base, err := sqlite.NewConnector(sqliteDSN)
	if err != nil {
		return nil, fmt.Errorf("sqldb: sqlite: open: %w", err)
	}
	db := sql.OpenDB(sqliteConnector{base})
	// Every connection is private (":memory:") and used by one fork only:
	// none is kept idle for reuse.
	db.SetMaxIdleConns(0)
	t := &sqliteTemplate{db: db}
	sc, c, err := t.open(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	defer t.discard(sc)
	for _, part := range []struct{ name, sql string }{{"schema.sql", schemaSQL}, {"data.sql", dataSQL}} {
		if strings.TrimSpace(part.sql) == "" {
			continue
		}
		if _, err := c.ExecContext(ctx, part.sql, nil); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqldb: sqlite: %s: %w", part.name, err)
		}
	}
	img, err := c.Serialize()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqldb: sqlite: serialize template: %w", err)
	}
	t.image = img
	// The in-memory database grows by reallocation (doubling) up to a
	// gigabyte unless max_page_count stops it; count the fork's growth
	// in whole pages of the template's size.
	var pageSize int64
	if err := sc.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil || pageSize <= 0 {
		db.Close()
		return nil, fmt.Errorf("sqldb: sqlite: page_size: %v", err)
	}
	t.maxMem = maxMemory
	t.maxPages = int64(len(img))/pageSize + max(maxMemory/pageSize, 1)
	return t, nil
}

// open takes a new private connection and configures it: temporary tables
// and sort spills stay in memory (a fork writes no file), no ATTACH, and a
// bound on value sizes.
func (t *sqliteTemplate) open(ctx context.Context) (*sql.Conn, sqliteConn, error) {
	sc, err := t.db.Conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("sqldb: sqlite: open: %w", err)
	}
	var c sqliteConn
	err = sc.Raw(func(dc any) error {
		var ok bool
		if c, ok = dc.(sqliteConn); !ok {
			return fmt.Errorf("driver connection %T lacks serialize/authorizer support", dc)
		}
		_, err := c.ExecContext(ctx, "PRAGMA temp_store = MEMORY; PRAGMA trusted_schema = OFF; PRAGMA foreign_keys = ON", nil)
		return err
	})
	if err == nil {
		_, err = sqlite.Limit(sc, sqliteLimitAttached, 0)
	}
	if err == nil {
		_, err = sqlite.Limit(sc, sqliteLimitLength, sqliteMaxLength)
	}
	if err != nil {
		t.discard(sc)
		return nil, nil, fmt.Errorf("sqldb: sqlite: configure: %w", err)
	}
	return sc, c, nil
}

// discard closes the connection for good (it is never reused).
func (t *sqliteTemplate) discard(sc *sql.Conn) error {
	// Returning driver.ErrBadConn from Raw makes database/sql close the
	// driver connection instead of pooling it.
	sc.Raw(func(any) error { return driver.ErrBadConn })
	if err := sc.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err
	}
	return nil
}

func (t *sqliteTemplate) dialect() sqllex.Dialect { return sqllex.SQLite }

func (t *sqliteTemplate) fork(ctx context.Context) (forkConn, error) {
	return t.forkImage(ctx, t.image)
}

// snapshot forks the fork's current state: its connection copied by
// SQLite's online backup (the database as the trajectory left it,
// uncommitted nothing: SQLite forks run in autocommit) into a new private
// connection.
func (f *sqliteFork) snapshot(ctx context.Context, _ []string, _ limits) (forkConn, error) {
	var (
		child forkConn
		err   error
	)
	// Inside the parent's Raw: database/sql uses the parent's connection
	// for nothing else while the backup reads it.
	rerr := f.sc.Raw(func(any) error {
		child, err = f.t.forkConn(ctx, &sqliteBackup{src: f.c}, nil)
		return nil
	})
	if rerr != nil {
		return nil, fmt.Errorf("sqldb: sqlite: fork: %w", rerr)
	}
	return child, err
}

// forkImage makes a fork holding the serialized database img.
func (t *sqliteTemplate) forkImage(ctx context.Context, img []byte) (forkConn, error) {
	return t.forkConn(ctx, nil, img)
}

// forkConn makes a fork: a new private connection holding a backup of
// b.src when b is set, else the serialized database img.
func (t *sqliteTemplate) forkConn(ctx context.Context, b *sqliteBackup, img []byte) (forkConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	octx := ctx
	if b != nil {
		octx = context.WithValue(ctx, sqliteBackupKey{}, b)
	}
	sc, c, err := t.open(octx)
	if err != nil {
		return nil, err
	}
	f := &sqliteFork{t: t, sc: sc, c: c}
	err = sc.Raw(func(dc any) error {
		if b != nil {
			if b.made == nil || dc != b.made {
				return fmt.Errorf("backup: database/sql returned a connection other than the backup's (%T)", dc)
			}
		} else if err := c.Deserialize(img); err != nil {
			return fmt.Errorf("deserialize: %w", err)
		}
		if _, err := c.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", t.maxPages), nil); err != nil {
			return fmt.Errorf("max_page_count: %w", err)
		}
		if err := c.RegisterAuthorizer(f.authorize); err != nil {
			return err
		}
		// Prepared once: every query reads total_changes() before and after.
		f.changes, err = c.Prepare("SELECT total_changes()")
		return err
	})
	if err != nil {
		t.discard(sc)
		return nil, fmt.Errorf("sqldb: sqlite: %w", err)
	}
	return f, nil
}

func (t *sqliteTemplate) close() error {
	t.image = nil
	return t.db.Close()
}

// sqliteFork is one fork: a private in-memory connection. Every use of c
// happens inside sc.Raw, so database/sql never touches it concurrently.
type sqliteFork struct {
	t        *sqliteTemplate
	sc       *sql.Conn
	c        sqliteConn
	changes  driver.Stmt // SELECT total_changes(), prepared on c
	readOnly bool        // the oracle is running: deny every write
	deferFK  bool        // a witnessed variant (trusted) turns defer_foreign_keys on or off
	denied   string      // why the authorizer last refused, for the error message
}

// readOnlyPragmas are the PRAGMAs the policy may run: they only read the schema.
var readOnlyPragmas = map[string]bool{
	"table_info": true, "table_xinfo": true, "table_list": true, "index_list": true,
	"index_info": true, "index_xinfo": true, "foreign_key_list": true, "foreign_key_check": true,
	"integrity_check": true, "quick_check": true, "collation_list": true,
}

// deniedFunctions could reach outside the database.
var deniedFunctions = map[string]bool{
	"load_extension": true, "fts3_tokenizer": true, "readfile": true, "writefile": true, "edit": true,
}

// authorize is SQLite's authorizer for this fork: it runs while each
// statement compiles, so nothing hides from it (comments, case, triggers).
func (f *sqliteFork) authorize(action sqlite.AuthorizerActionCode, arg1, arg2, dbName, _ string) sqlite.AuthorizerReturnCode {
	deny := func(why string) sqlite.AuthorizerReturnCode {
		if f.denied == "" {
			f.denied = why
		}
		return sqlite.AuthorizerDeny
	}
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthRecursive:
		return sqlite.AuthorizerOK
	case sqlite.AuthFunction:
		if deniedFunctions[strings.ToLower(arg2)] {
			return deny(fmt.Sprintf("the function %s() is not allowed", arg2))
		}
		return sqlite.AuthorizerOK
	case sqlite.AuthPragma:
		name := strings.ToLower(arg1)
		if f.deferFK && name == "defer_foreign_keys" {
			return sqlite.AuthorizerOK
		}
		if readOnlyPragmas[name] && (arg2 == "" || name != "integrity_check" && name != "quick_check" || isDigits(arg2)) {
			return sqlite.AuthorizerOK
		}
		return deny(fmt.Sprintf("PRAGMA %s is not allowed (only schema-reading PRAGMAs such as table_info, index_list, foreign_key_list, foreign_key_check, integrity_check)", arg1))
	case sqlite.AuthAttach:
		return deny("ATTACH is not allowed: the database is the only one this tool can use")
	case sqlite.AuthDetach:
		return deny("DETACH is not allowed")
	case sqlite.AuthCreateVTable, sqlite.AuthDropVTable:
		return deny("virtual tables are not allowed")
	case sqlite.AuthCreateTempTable, sqlite.AuthCreateTempView, sqlite.AuthCreateTempTrigger, sqlite.AuthCreateTempIndex:
		// SQLite resolves unqualified names in temp first: a temporary
		// table could shadow a fixture table from the reward's oracle.
		return deny("temporary tables, views, triggers and indexes are not allowed (they would shadow the database's own tables)")
	}
	if f.readOnly {
		return deny("the oracle is read-only")
	}
	if dbName == "temp" {
		// Written temp.X, a temporary object is created without the TEMP
		// keyword's action codes: it would shadow the database's own tables
		// too, and the temp store is no part of the fork's page budget.
		return deny("temporary tables, views, triggers and indexes are not allowed (they would shadow the database's own tables)")
	}
	if dbName != "" && dbName != "main" {
		return deny(fmt.Sprintf("database %q is not allowed", dbName))
	}
	// Writes and schema changes of this fork's own private copy.
	return sqlite.AuthorizerOK
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func (f *sqliteFork) query(ctx context.Context, src string, lim limits) (*Result, error) {
	st, qerr := singleStatement(src, sqllex.SQLite)
	if qerr != nil {
		return nil, qerr
	}
	switch st.firstWord() {
	case "vacuum":
		return nil, refused("VACUUM is not allowed (VACUUM INTO would write a file)")
	case "attach":
		return nil, refused("ATTACH is not allowed: the database is the only one this tool can use")
	case "detach":
		return nil, refused("DETACH is not allowed")
	}
	return f.run(ctx, src, lim)
}

func (f *sqliteFork) oracle(ctx context.Context, src string, lim limits) (*Result, error) {
	f.readOnly = true
	defer func() { f.readOnly = false }()
	res, err := f.run(ctx, src, lim)
	var qe *QueryError
	if errors.As(err, &qe) {
		return nil, fmt.Errorf("sqldb: oracle %q: %w", clip(src, 80), err)
	}
	return res, err
}

// run executes one statement and collects its rows within the caps.
func (f *sqliteFork) run(ctx context.Context, src string, lim limits) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lim.timeout = budget(ctx, lim.timeout)
	cctx, cancel := callCtx(ctx, lim.timeout)
	defer cancel()
	// Sorts, DISTINCT and subqueries work in memory (the temp store is
	// memory): their growth is bounded per statement, beside the fork's
	// page budget that bounds what it keeps.
	mctx, mcancel := context.WithCancelCause(cctx)
	defer mcancel(nil)
	// The statement's own text is held several times while it runs (its
	// copy, the parsed literals, column names): that much more is its due.
	stop := watchHeap(f.t.maxMem+8*int64(len(src)), mcancel)
	defer stop()
	cctx = mctx
	f.denied = ""
	var res *Result
	var changesErr error
	err := f.sc.Raw(func(any) error {
		before, err := f.totalChanges()
		if err != nil {
			changesErr = err
			return nil
		}
		if res, err = f.collect(cctx, src, lim); err != nil {
			return err
		}
		after, err := f.totalChanges()
		if err != nil {
			changesErr = err
			return nil
		}
		res.RowsAffected = after - before
		return nil
	})
	if changesErr != nil {
		return nil, changesErr
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, ctx.Err()
		}
		if errors.Is(context.Cause(cctx), errStatementMemory) {
			return nil, memoryError(f.t.maxMem, "for one statement's working memory (sorts, DISTINCT, subqueries)", err)
		}
		if timedOut(cctx) || deadlineHit(ctx) {
			return nil, timeoutError(lim.timeout, err)
		}
		if f.denied != "" {
			return nil, &QueryError{Kind: KindRefused, Msg: "refused: " + f.denied, Err: err}
		}
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqliteFull {
			return nil, memoryError(f.t.maxMem, "for the database's growth", err)
		}
		if errors.As(err, &se) && se.Code()&0xff == sqliteNoMem {
			return nil, memoryError(heapLimit(), "for every sandbox of this process together", err)
		}
		if errors.As(err, &se) {
			return nil, &QueryError{Kind: KindSQL, Msg: "SQL error: " + sqliteMessage(se), Err: err}
		}
		return nil, fmt.Errorf("sqldb: sqlite: %w", err)
	}
	return res, nil
}

func (f *sqliteFork) collect(ctx context.Context, src string, lim limits) (*Result, error) {
	rows, err := f.c.QueryContext(ctx, src, nil)
	if err != nil {
		return nil, err
	}
	cols := rows.Columns()
	col := newCollector(cols, lim)
	dest := make([]driver.Value, len(cols))
	// Columns declared BOOLEAN hold 0/1 in SQLite; report them as booleans
	// like PostgreSQL does.
	isBool := make([]bool, len(cols))
	if tn, ok := rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		for i := range cols {
			isBool[i] = strings.EqualFold(tn.ColumnTypeDatabaseTypeName(i), "BOOLEAN")
		}
	}
	for {
		if err := rows.Next(dest); err != nil {
			if err == io.EOF {
				break
			}
			rows.Close()
			return nil, err
		}
		row := make([]any, len(dest))
		for i, v := range dest {
			if n, ok := v.(int64); ok && isBool[i] && (n == 0 || n == 1) {
				row[i] = n == 1
				continue
			}
			row[i] = normalize(v)
		}
		if !col.add(row) {
			break
		}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return col.res, nil
}

// totalChanges is SQLite's count of rows changed on the connection so far;
// callers are inside sc.Raw.
func (f *sqliteFork) totalChanges() (int64, error) {
	rows, err := f.changes.(driver.StmtQueryContext).QueryContext(context.Background(), nil)
	if err != nil {
		return 0, fmt.Errorf("sqldb: sqlite: total_changes: %w", err)
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil {
		return 0, fmt.Errorf("sqldb: sqlite: total_changes: %w", err)
	}
	n, ok := dest[0].(int64)
	if !ok {
		return 0, fmt.Errorf("sqldb: sqlite: total_changes: got %T", dest[0])
	}
	return n, nil
}

func sqliteMessage(e *sqlite.Error) string {
	msg := e.Error()
	if i := strings.LastIndex(msg, " ("); i > 0 && strings.HasSuffix(msg, ")") {
		msg = msg[:i]
	}
	return msg
}

func (f *sqliteFork) tables(ctx context.Context) ([]Table, error) {
	f.readOnly = true
	defer func() { f.readOnly = false }()
	const q = `SELECT m.name, p.name, p.type, p."notnull", p.pk
FROM sqlite_schema AS m JOIN pragma_table_info(m.name) AS p
WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\_%' ESCAPE '\'
ORDER BY m.name, p.cid`
	rows, err := f.sc.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sqldb: sqlite: tables: %w", err)
	}
	defer rows.Close()
	var out []Table
	for rows.Next() {
		var (
			tname, cname, ctype string
			notNull, pk         int64
		)
		if err := rows.Scan(&tname, &cname, &ctype, &notNull, &pk); err != nil {
			return nil, fmt.Errorf("sqldb: sqlite: tables: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Name != tname {
			out = append(out, Table{Name: tname})
		}
		t := &out[len(out)-1]
		t.Columns = append(t.Columns, Column{Name: cname, Type: ctype, NotNull: notNull != 0 || pk > 0, PrimaryKey: pk > 0})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqldb: sqlite: tables: %w", err)
	}
	return out, nil
}

// lost is always nil: an in-memory database has no connection to lose.
func (f *sqliteFork) lost() error { return nil }

func (f *sqliteFork) close() error {
	var errs []error
	if f.changes != nil {
		errs = append(errs, f.sc.Raw(func(any) error { return f.changes.Close() }))
	}
	return errors.Join(append(errs, f.t.discard(f.sc))...)
}
