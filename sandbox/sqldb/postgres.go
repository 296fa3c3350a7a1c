package sqldb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/mcprl/mcprl/sandbox/sqllex"
)

// PolicyRole is the NOLOGIN role the policy's SQL runs as on PostgreSQL. It
// holds no privileges of its own: each fork grants it the use of its own
// slot schema inside the fork's transaction, so the grant vanishes at Close.
const PolicyRole = "mcprl_policy"

// pgMaxMessage bounds one protocol message (one result row).
const pgMaxMessage = sqliteMaxLength

// pgMaxIdle bounds the connections a template keeps open between forks.
const pgMaxIdle = 16

// PostgreSQL design: the template builds the fixture into a schema "slot"
// (committed) and remembers its sequences. A fork takes a connection and a
// free slot (building a new one when all are in use), and opens a
// transaction in which the policy role may use that slot only; the policy's
// statements each run inside a savepoint, and Close rolls the transaction
// back, so the slot is pristine again for the next fork. Concurrent forks
// never share a slot, so they neither see nor block each other.
type pgTemplate struct {
	cfg       *pgconn.Config
	id        string
	schemaSQL string
	dataSQL   string
	timeout   time.Duration
	maxMemory int64
	tempLimit bool // the DSN's user may set temp_file_limit
	logger    *slog.Logger

	// anchor is held open for the template's whole life: its
	// application_name marks the template's slots as live, so another
	// process's sweepStale never drops them. Close drops the slots over it.
	anchor *pgconn.PgConn

	mu      sync.Mutex
	idle    []*pgconn.PgConn
	free    []string // slot schemas not in use
	slots   []string // every slot schema built
	nslot   int
	seqs    []pgSeq // pristine sequence states (names relative to the slot)
	closed  bool
	pending sync.WaitGroup // forks being built
}

type pgSeq struct {
	name   string
	value  int64
	called bool
}

func newPGTemplate(ctx context.Context, schemaSQL, dataSQL string, opts Options) (*pgTemplate, error) {
	cfg, err := pgconn.ParseConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("sqldb: postgres: DSN: %w", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	t := &pgTemplate{cfg: cfg, id: hex.EncodeToString(b[:]), schemaSQL: schemaSQL, dataSQL: dataSQL,
		timeout: opts.StatementTimeout, maxMemory: opts.MaxMemory, logger: opts.Logger}
	cfg.RuntimeParams["application_name"] = t.AppName()
	// One row may not exceed what SQLite allows for one value either:
	// SELECT repeat('x', 1e9) must not allocate a gigabyte here.
	cfg.MaxProtocolMessageBodyLen = pgMaxMessage
	c, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := ensurePolicyRole(ctx, c); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	sweepStale(ctx, c)
	t.tempLimit = t.canSetTempLimit(ctx, c)
	slot, err := t.buildSlot(ctx, c)
	if err != nil {
		c.Close(context.Background())
		return nil, err
	}
	seqs, err := readSequences(ctx, c, slot)
	if err != nil {
		t.dropSlots(ctx, c)
		c.Close(context.Background())
		return nil, err
	}
	t.seqs = seqs
	t.free = append(t.free, slot)
	t.anchor = c
	return t, nil
}

// AppName is the application_name of the template's connections.
func (t *pgTemplate) AppName() string { return "mcprl-sqldb-" + t.id }

// SchemaPrefix is the prefix of the template's slot schemas.
func (t *pgTemplate) SchemaPrefix() string { return "mcprl_" + t.id + "_s" }

func (t *pgTemplate) connect(ctx context.Context) (*pgconn.PgConn, error) {
	c, err := pgconn.ConnectConfig(ctx, t.cfg)
	if err != nil {
		return nil, fmt.Errorf("sqldb: postgres: connect: %w", err)
	}
	return c, nil
}

// ensurePolicyRole creates the NOLOGIN policy role if missing and lets the
// session user SET ROLE to it.
func ensurePolicyRole(ctx context.Context, c *pgconn.PgConn) error {
	role := quoteIdent(PolicyRole)
	_, err := c.Exec(ctx, `DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '`+PolicyRole+`') THEN
    CREATE ROLE `+role+` NOLOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$`).ReadAll()
	if err != nil {
		return fmt.Errorf("sqldb: postgres: create role %s (the DSN's user needs CREATEROLE, or create it NOLOGIN yourself): %w", PolicyRole, err)
	}
	isMember := func() bool {
		res, err := c.Exec(ctx, `SELECT pg_has_role(current_user, '`+PolicyRole+`', 'USAGE') AND pg_has_role(current_user, '`+PolicyRole+`', 'MEMBER')`).ReadAll()
		return err == nil && len(res) == 1 && len(res[0].Rows) == 1 && string(res[0].Rows[0][0]) == "t"
	}
	if !isMember() {
		// Another process may grant it at the same moment: recheck on error.
		if _, err := c.Exec(ctx, "GRANT "+role+" TO CURRENT_USER").ReadAll(); err != nil && !isMember() {
			return fmt.Errorf("sqldb: postgres: grant %s to the session user: %w", PolicyRole, err)
		}
	}
	return nil
}

// canSetTempLimit reports whether the session user may set temp_file_limit
// (a superuser, or one granted SET ON PARAMETER temp_file_limit); if not,
// it logs that forks' temporary files are bounded by time only.
func (t *pgTemplate) canSetTempLimit(ctx context.Context, c *pgconn.PgConn) bool {
	_, err := c.Exec(ctx, fmt.Sprintf("BEGIN; SET LOCAL temp_file_limit = %d; ROLLBACK", t.maxMemory>>10)).ReadAll()
	if err == nil {
		return true
	}
	c.Exec(ctx, "ROLLBACK").ReadAll()
	t.logger.Warn("sqldb: postgres: the DSN's user may not set temp_file_limit, so the policy's temporary files are bounded only by the statement timeout; "+
		"a superuser can allow it: GRANT SET ON PARAMETER temp_file_limit TO <user>", "err", err)
	return false
}

// sweepStale drops slot schemas left by templates whose process died
// without closing them: those whose application_name has no live
// connection. Failures are ignored (a schema another user owns stays).
func sweepStale(ctx context.Context, c *pgconn.PgConn) {
	res, err := c.Exec(ctx, `SELECT n.nspname FROM pg_namespace n
WHERE n.nspname ~ '^mcprl_[0-9a-f]{12}_s[0-9]+$' AND pg_has_role(n.nspowner, 'USAGE')
  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                  WHERE a.application_name = 'mcprl-sqldb-' || substring(n.nspname from 7 for 12))`).ReadAll()
	if err != nil || len(res) == 0 {
		return
	}
	for _, r := range res[0].Rows {
		c.Exec(ctx, "DROP SCHEMA IF EXISTS "+quoteIdent(string(r[0]))+" CASCADE").ReadAll()
	}
}

// buildSlot creates a new slot schema with the fixture, committed.
func (t *pgTemplate) buildSlot(ctx context.Context, c *pgconn.PgConn) (string, error) {
	t.mu.Lock()
	name := t.SchemaPrefix() + strconv.Itoa(t.nslot)
	t.nslot++
	t.mu.Unlock()
	s := quoteIdent(name)
	steps := []struct{ what, sql string }{
		{"create slot", "BEGIN; CREATE SCHEMA " + s + "; SET LOCAL search_path = " + s},
		{"schema.sql", t.schemaSQL},
		{"data.sql", t.dataSQL},
		// The policy role owns the slot's objects so that a fork may alter
		// or drop them; it can reach them only inside a fork's transaction,
		// which grants it the schema and is always rolled back.
		// (ALTER ... OWNER needs the new owner to hold CREATE on the schema
		// for a moment.)
		{"owners", "GRANT CREATE ON SCHEMA " + s + " TO " + quoteIdent(PolicyRole) + `; DO $$ DECLARE r record; BEGIN
  FOR r IN SELECT c.oid::regclass AS name, c.relkind FROM pg_class c
           WHERE c.relnamespace = ` + quoteLiteral(name) + `::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
  LOOP
    EXECUTE format('ALTER %s %s OWNER TO ` + quoteIdent(PolicyRole) + `',
      CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END, r.name);
  END LOOP;
  FOR r IN SELECT c.oid::regclass AS name FROM pg_class c
           WHERE c.relnamespace = ` + quoteLiteral(name) + `::regnamespace AND c.relkind = 'S'
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
  LOOP
    EXECUTE format('ALTER SEQUENCE %s OWNER TO ` + quoteIdent(PolicyRole) + `', r.name);
  END LOOP;
END $$; REVOKE CREATE ON SCHEMA ` + s + " FROM " + quoteIdent(PolicyRole) + "; COMMIT"},
	}
	for _, st := range steps {
		if strings.TrimSpace(st.sql) == "" {
			continue
		}
		if _, err := c.Exec(ctx, st.sql).ReadAll(); err != nil {
			c.Exec(context.Background(), "ROLLBACK").ReadAll()
			return "", fmt.Errorf("sqldb: postgres: %s: %w", st.what, err)
		}
	}
	t.mu.Lock()
	t.slots = append(t.slots, name)
	t.mu.Unlock()
	return name, nil
}

func readSequences(ctx context.Context, c *pgconn.PgConn, slot string) ([]pgSeq, error) {
	res, err := c.Exec(ctx, "SELECT sequencename, COALESCE(last_value, start_value), last_value IS NOT NULL FROM pg_sequences WHERE schemaname = "+quoteLiteral(slot)+" ORDER BY 1").ReadAll()
	if err != nil {
		return nil, fmt.Errorf("sqldb: postgres: sequences: %w", err)
	}
	var seqs []pgSeq
	for _, r := range res[0].Rows {
		v, err := strconv.ParseInt(string(r[1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sqldb: postgres: sequence %s: %w", r[0], err)
		}
		seqs = append(seqs, pgSeq{name: string(r[0]), value: v, called: string(r[2]) == "t"})
	}
	return seqs, nil
}

func (t *pgTemplate) dialect() sqllex.Dialect { return sqllex.PostgreSQL }

func (t *pgTemplate) fork(ctx context.Context) (forkConn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	t.pending.Add(1)
	var c *pgconn.PgConn
	if n := len(t.idle); n > 0 {
		c, t.idle = t.idle[n-1], t.idle[:n-1]
	}
	slot := ""
	if n := len(t.free); n > 0 {
		slot, t.free = t.free[n-1], t.free[:n-1]
	}
	t.mu.Unlock()
	defer t.pending.Done()

	fail := func(err error) (forkConn, error) {
		if c != nil {
			c.Close(context.Background())
		}
		if slot != "" {
			t.putSlot(slot)
		}
		return nil, err
	}
	var err error
	fromIdle := c != nil
	if c == nil {
		if c, err = t.connect(ctx); err != nil {
			return fail(err)
		}
	}
	if slot == "" {
		if slot, err = t.buildSlot(ctx, c); err != nil {
			return fail(err)
		}
	}
	var b strings.Builder
	s := quoteIdent(slot)
	b.WriteString("BEGIN; GRANT USAGE, CREATE ON SCHEMA " + s + " TO " + quoteIdent(PolicyRole))
	// pg_temp last: a temporary table cannot shadow a fixture table.
	b.WriteString("; SET LOCAL search_path = " + s + ", pg_temp")
	if len(t.seqs) > 0 {
		b.WriteString("; SELECT ")
		for i, q := range t.seqs {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "setval(%s, %d, %t)", quoteLiteral(quoteIdent(slot)+"."+quoteIdent(q.name)), q.value, q.called)
		}
	}
	fmt.Fprintf(&b, "; SET LOCAL statement_timeout = %d", t.timeout.Milliseconds())
	// Memory: sorts and hashes spill to disk beyond work_mem, and the
	// spills stop at temp_file_limit.
	fmt.Fprintf(&b, "; SET LOCAL work_mem = %d; SET LOCAL maintenance_work_mem = %d", max(t.maxMemory/4>>10, 64), max(t.maxMemory/4>>10, 1024))
	if t.tempLimit {
		fmt.Fprintf(&b, "; SET LOCAL temp_file_limit = %d", t.maxMemory>>10)
	}
	// A fork may sit idle in its transaction while the policy generates.
	b.WriteString("; SET LOCAL idle_in_transaction_session_timeout = 0")
	b.WriteString("; SET LOCAL ROLE " + quoteIdent(PolicyRole))
	_, err = c.Exec(ctx, b.String()).ReadAll()
	var pe *pgconn.PgError
	if err != nil && fromIdle && ctx.Err() == nil && (c.IsClosed() || !errors.As(err, &pe) || pe.Severity == "FATAL") {
		// The server ended the idle connection (restart, idle timeout):
		// start over on a new one.
		c.Close(context.Background())
		if c, err = t.connect(ctx); err != nil {
			return fail(err)
		}
		_, err = c.Exec(ctx, b.String()).ReadAll()
	}
	if err != nil {
		return fail(fmt.Errorf("sqldb: postgres: begin fork: %w", err))
	}
	return &pgFork{t: t, c: c, slot: slot}, nil
}

func (t *pgTemplate) putSlot(slot string) {
	t.mu.Lock()
	t.free = append(t.free, slot)
	t.mu.Unlock()
}

// release takes back a fork's connection (closing it when broken or when
// enough are idle) and its slot.
func (t *pgTemplate) release(c *pgconn.PgConn, slot string, broken bool) {
	t.mu.Lock()
	t.free = append(t.free, slot)
	keep := !broken && !t.closed && len(t.idle) < pgMaxIdle && !c.IsClosed()
	if keep {
		t.idle = append(t.idle, c)
	}
	t.mu.Unlock()
	if !keep {
		c.Close(context.Background())
	}
}

func (t *pgTemplate) close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.pending.Wait()
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range idle {
		c.Close(ctx)
	}
	err := t.dropSlots(ctx, t.anchor)
	t.anchor.Close(ctx)
	if err != nil {
		return fmt.Errorf("sqldb: postgres: close template: %w", err)
	}
	return nil
}

func (t *pgTemplate) dropSlots(ctx context.Context, c *pgconn.PgConn) error {
	t.mu.Lock()
	slots := t.slots
	t.slots, t.free = nil, nil
	t.mu.Unlock()
	if len(slots) == 0 {
		return nil
	}
	q := make([]string, len(slots))
	for i, s := range slots {
		q[i] = quoteIdent(s)
	}
	_, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+strings.Join(q, ", ")+" CASCADE").ReadAll()
	return err
}

type pgFork struct {
	t      *pgTemplate
	c      *pgconn.PgConn
	slot   string
	broken error // set when the connection's state is unknown; the fork is then unusable
}

// pgAllowed are the statements the policy may run. Schema changes are
// allowed on the fork's own slot (the policy role owns the slot's objects,
// and everything is rolled back at Close) but only for the object kinds in
// pgDDLObjects: no functions, procedures, triggers, rules or extensions,
// which could run code as another role.
var pgAllowed = map[string]bool{
	"select": true, "with": true, "insert": true, "update": true, "delete": true,
	"values": true, "table": true, "explain": true, "show": true, "truncate": true,
}

var pgDDL = map[string]bool{"create": true, "alter": true, "drop": true}

var pgDDLObjects = map[string]bool{"table": true, "view": true, "index": true, "sequence": true}

// pgDDLModifiers may come between CREATE and the object kind.
var pgDDLModifiers = map[string]bool{"or": true, "replace": true, "temp": true, "temporary": true, "unlogged": true, "unique": true, "local": true, "global": true}

// ddlObject returns the object kind of a CREATE/ALTER/DROP statement.
func (s statement) ddlObject() string {
	for _, t := range s[1:] {
		if t.Kind != sqllex.Word {
			return ""
		}
		if pgDDLModifiers[t.Text] {
			continue
		}
		return t.Text
	}
	return ""
}

// pgCommands are the words a PostgreSQL statement can start with; a
// statement starting with any other word is a syntax error the server
// reports itself.
var pgCommands = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`abort alter analyze begin call checkpoint close cluster comment commit copy
		create deallocate declare delete discard do drop end execute explain fetch grant import insert listen
		load lock merge move notify prepare reassign refresh reindex release reset revoke rollback savepoint
		security select set show start table truncate unlisten update vacuum values with`) {
		pgCommands[w] = true
	}
}

// pgDeniedExact and pgDeniedPrefix are identifiers the policy may not
// name: functions and views that change session settings or the role,
// reach server files or other sessions, run SQL given as a string, or hold
// locks beyond the fork's transaction.
var pgDeniedExact = map[string]string{
	"set_config":           "it changes session settings",
	"pg_settings":          "it changes session settings",
	"pg_file_settings":     "it reads server configuration",
	"pg_hba_file_rules":    "it reads server configuration",
	"pg_stat_file":         "it reads server files",
	"pg_terminate_backend": "it signals other sessions",
	"pg_cancel_backend":    "it signals other sessions",
	"pg_reload_conf":       "it changes the server",
	"pg_rotate_logfile":    "it changes the server",
	"pg_promote":           "it changes the server",
	"pg_switch_wal":        "it changes the server",
	"pg_current_logfile":   "it reads server files",
	"ts_stat":              "it runs SQL given as a string",
	"ts_rewrite":           "it runs SQL given as a string",
	"loread":               "large objects are server files",
	"lowrite":              "large objects are server files",
	"pg_notify":            "it signals other sessions",
}

var pgDeniedPrefix = []struct{ prefix, why string }{
	{"pg_read_", "it reads server files"},
	{"pg_ls_", "it lists server directories"},
	{"pg_file_", "it writes server files"},
	{"pg_logdir", "it reads server files"},
	{"lo_", "large objects are server files"},
	{"pg_largeobject", "large objects are server files"},
	{"pg_advisory", "advisory locks outlive the fork"},
	{"pg_try_advisory", "advisory locks outlive the fork"},
	{"dblink", "it connects to other databases"},
	{"query_to_xml", "it runs SQL given as a string"},
	{"cursor_to_xml", "it runs SQL given as a string"},
	{"table_to_xml", "it runs SQL given as a string"},
	{"schema_to_xml", "it runs SQL given as a string"},
	{"database_to_xml", "it runs SQL given as a string"},
	{"pg_backup", "it changes the server"},
	{"pg_start_backup", "it changes the server"},
	{"pg_stop_backup", "it changes the server"},
	{"pg_create_", "it changes the server"},
	{"pg_drop_replication", "it changes the server"},
	{"pg_replication", "it changes the server"},
	{"pg_logical", "it changes the server"},
}

// checkPG applies the PostgreSQL statement policy.
func checkPG(src string) *QueryError {
	st, qerr := singleStatement(src, sqllex.PostgreSQL)
	if qerr != nil {
		return qerr
	}
	switch w := st.firstWord(); {
	case pgAllowed[w]:
	case pgDDL[w]:
		if obj := st.ddlObject(); !pgDDLObjects[obj] {
			return refused("%s %s is not allowed: only tables, views, indexes and sequences may be created, altered or dropped", strings.ToUpper(w), strings.ToUpper(obj))
		}
	case w == "begin" || w == "start" || w == "commit" || w == "end" || w == "rollback" || w == "abort" ||
		w == "savepoint" || w == "release" || w == "prepare":
		return refused("transaction control (%s) is not allowed: the sandbox runs each trajectory in its own transaction and discards it at the end", strings.ToUpper(w))
	case w == "set" || w == "reset":
		return refused("%s is not allowed: the role, search_path and timeouts are fixed by the sandbox", strings.ToUpper(w))
	case w == "copy":
		return refused("COPY is not allowed: no server files or programs")
	case w == "" || !pgCommands[w]:
		// Not a statement at all: the server's syntax error says so.
	default:
		return refused("%s statements are not allowed: use SELECT, INSERT, UPDATE, DELETE, WITH, VALUES, TABLE, EXPLAIN, SHOW, TRUNCATE, or CREATE/ALTER/DROP of tables, views, indexes and sequences", strings.ToUpper(w))
	}
	for _, tok := range st {
		switch tok.Kind {
		case sqllex.UnicodeIdent:
			return refused("Unicode-escaped identifiers (U&\"...\") are not allowed")
		case sqllex.Word, sqllex.QuotedIdent:
			if why, ok := pgDeniedExact[tok.Text]; ok {
				return refused("%s is not allowed: %s", tok.Text, why)
			}
			for _, p := range pgDeniedPrefix {
				if strings.HasPrefix(tok.Text, p.prefix) {
					return refused("%s is not allowed: %s", tok.Text, p.why)
				}
			}
		}
	}
	return nil
}

func (f *pgFork) query(ctx context.Context, src string, lim limits) (*Result, error) {
	if f.broken != nil {
		return nil, fmt.Errorf("sqldb: postgres: fork unusable: %w", f.broken)
	}
	if qerr := checkPG(src); qerr != nil {
		return nil, qerr
	}
	res, err := f.inSavepoint(ctx, lim, false, func(cctx context.Context) (*Result, error) {
		return f.collect(cctx, src, lim)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// inSavepoint runs fn inside a savepoint: on failure the savepoint is
// rolled back so the fork's transaction goes on; for the oracle (trusted
// SQL, unchecked) it is always rolled back, so it cannot change the fork.
// Both run as the policy role, which owns the slot: the oracle never runs
// objects the policy defined (views, defaults) with more privileges than
// the policy has. After a policy statement the role is checked.
func (f *pgFork) inSavepoint(ctx context.Context, lim limits, oracle bool, fn func(context.Context) (*Result, error)) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The server's statement_timeout ends a long statement cleanly, within
	// the caller's deadline too (a deadline that cut the statement short
	// would cost the connection); the client-side deadline, a little later,
	// is the backstop.
	server, grace := lim.timeout, time.Second
	if b := budget(ctx, lim.timeout); b < lim.timeout {
		// The server must answer before the caller's deadline; the
		// client waits a little past it before it cuts the connection.
		lim.timeout = b
		server = b - min(b/10, 100*time.Millisecond)
		grace = max(b/10, 20*time.Millisecond)
	}
	if server < time.Millisecond {
		return nil, timeoutError(lim.timeout, context.DeadlineExceeded)
	}
	cctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), lim.timeout+grace, errCallTimeout)
	defer cancel()
	// The caller's cancellation (not its deadline) still stops the call.
	defer context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})()
	setup := fmt.Sprintf("SET LOCAL statement_timeout = %d; SAVEPOINT mcprl_q", server.Milliseconds())
	if _, err := f.c.Exec(cctx, setup).ReadAll(); err != nil {
		return nil, f.fail(ctx, cctx, lim, err)
	}
	res, err := fn(cctx)
	// Ending the savepoint must not fail for want of the call's time: the
	// connection would be lost with it.
	ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer ecancel()
	if err != nil || oracle {
		if _, rerr := f.c.Exec(ectx, "ROLLBACK TO SAVEPOINT mcprl_q; RELEASE SAVEPOINT mcprl_q").ReadAll(); rerr != nil {
			if err != nil {
				rerr = errors.Join(err, rerr)
			}
			return nil, f.fail(ctx, cctx, lim, rerr)
		}
		if err != nil {
			return nil, f.mapErr(ctx, cctx, lim, err)
		}
		return res, nil
	}
	out, err := f.c.Exec(ectx, "RELEASE SAVEPOINT mcprl_q; SELECT current_user").ReadAll()
	if err != nil {
		return nil, f.fail(ctx, cctx, lim, err)
	}
	if who := string(out[len(out)-1].Rows[0][0]); who != PolicyRole {
		f.broken = fmt.Errorf("the policy's statement left the role %q", who)
		return nil, fmt.Errorf("sqldb: postgres: confinement breach: %w", f.broken)
	}
	return res, nil
}

// mapErr turns a statement's error into a QueryError when it is the
// statement's own fault, or marks the fork broken.
func (f *pgFork) mapErr(ctx, cctx context.Context, lim limits, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57014": // query_canceled: statement_timeout
			return timeoutError(lim.timeout, err)
		case "53400": // configuration_limit_exceeded: temp_file_limit
			return memoryError(f.t.maxMemory, "for temporary files", err)
		case "53200": // out_of_memory
			return memoryError(f.t.maxMemory, "in memory", err)
		case "42501": // insufficient_privilege
			return &QueryError{Kind: KindRefused, Msg: "refused: " + pgMessage(pe), Err: err}
		}
		return &QueryError{Kind: KindSQL, Msg: "SQL error: " + pgMessage(pe), Err: err}
	}
	return f.fail(ctx, cctx, lim, err)
}

// fail marks the fork broken after a connection-level failure.
func (f *pgFork) fail(ctx, cctx context.Context, lim limits, err error) error {
	f.broken = err
	var big *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &big) {
		return &QueryError{Kind: KindRefused, Err: err, Msg: fmt.Sprintf(
			"refused: a result row is larger than %d bytes", pgMaxMessage)}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	if timedOut(cctx) || deadlineHit(ctx) {
		return timeoutError(lim.timeout, err)
	}
	return fmt.Errorf("sqldb: postgres: %w", err)
}

func pgMessage(pe *pgconn.PgError) string {
	msg := pe.Message
	if pe.Detail != "" {
		msg += "; " + pe.Detail
	}
	if pe.Hint != "" {
		msg += " (hint: " + pe.Hint + ")"
	}
	if pe.Position > 0 {
		msg += fmt.Sprintf(" at character %d", pe.Position)
	}
	return msg
}

// collect runs one statement over the extended protocol (one statement per
// call, text results) and reads rows within the caps.
func (f *pgFork) collect(ctx context.Context, src string, lim limits) (*Result, error) {
	rr := f.c.ExecParams(ctx, src, nil, nil, nil, nil)
	fds := rr.FieldDescriptions()
	var cols []string
	for _, fd := range fds {
		cols = append(cols, fd.Name)
	}
	col := newCollector(cols, lim)
	for rr.NextRow() {
		if col.done {
			continue // drain: the statement runs to its end
		}
		vals := rr.Values()
		row := make([]any, len(vals))
		for i, v := range vals {
			row[i] = pgValue(fds[i].DataTypeOID, v)
		}
		col.add(row)
	}
	tag, err := rr.Close()
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 || tag.Insert() || tag.Update() || tag.Delete() {
		col.res.RowsAffected = tag.RowsAffected()
	}
	if tag.Select() || tag.String() == "SHOW" {
		col.res.RowsAffected = 0
	}
	return col.res, nil
}

// pgValue converts a text-format value by its type.
func pgValue(oid uint32, v []byte) any {
	if v == nil {
		return nil
	}
	s := string(v)
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID:
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	case pgtype.Float4OID, pgtype.Float8OID, pgtype.NumericOID:
		if x, err := strconv.ParseFloat(s, 64); err == nil {
			return normalize(x)
		}
	case pgtype.BoolOID:
		return s == "t"
	}
	return s
}

func (f *pgFork) oracle(ctx context.Context, src string, lim limits) (*Result, error) {
	if f.broken != nil {
		return nil, fmt.Errorf("sqldb: postgres: fork unusable: %w", f.broken)
	}
	res, err := f.inSavepoint(ctx, lim, true, func(cctx context.Context) (*Result, error) {
		return f.collect(cctx, src, lim)
	})
	var qe *QueryError
	if errors.As(err, &qe) {
		return nil, fmt.Errorf("sqldb: oracle %q: %w", clip(src, 80), err)
	}
	return res, err
}

func (f *pgFork) tables(ctx context.Context) ([]Table, error) {
	if f.broken != nil {
		return nil, fmt.Errorf("sqldb: postgres: fork unusable: %w", f.broken)
	}
	q := `SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
  EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary AND a.attnum = ANY (i.indkey))
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relnamespace = ` + quoteLiteral(f.slot) + `::regnamespace AND c.relkind IN ('r', 'p')
ORDER BY c.relname, a.attnum`
	res, err := f.inSavepoint(ctx, limits{timeout: f.t.timeout, maxRows: 1 << 30, maxBytes: 1 << 30}, true, func(cctx context.Context) (*Result, error) {
		return f.collect(cctx, q, limits{timeout: f.t.timeout, maxRows: 1 << 30, maxBytes: 1 << 30})
	})
	if err != nil {
		return nil, fmt.Errorf("sqldb: postgres: tables: %w", err)
	}
	var out []Table
	for _, r := range res.Rows {
		tname, _ := r[0].(string)
		if len(out) == 0 || out[len(out)-1].Name != tname {
			out = append(out, Table{Name: tname})
		}
		t := &out[len(out)-1]
		cname, _ := r[1].(string)
		ctype, _ := r[2].(string)
		nn, _ := r[3].(bool)
		pk, _ := r[4].(bool)
		t.Columns = append(t.Columns, Column{Name: cname, Type: ctype, NotNull: nn, PrimaryKey: pk})
	}
	return out, nil
}

// snapshot forks the fork's current state. Its changes are an open
// transaction no other connection can read, so the new fork starts from a
// fresh slot of the fixture and runs the statements that changed the
// parent again, in order, as the policy role: exact for the policy's SQL
// unless it depends on the clock or randomness.
func (f *pgFork) snapshot(ctx context.Context, writes []string, lim limits) (forkConn, error) {
	if f.broken != nil {
		return nil, fmt.Errorf("sqldb: postgres: fork unusable: %w", f.broken)
	}
	return f.t.replay(ctx, writes, lim)
}

func (f *pgFork) park(writes []string, lim limits) forkConn {
	return &pgParked{t: f.t, writes: writes, lim: lim}
}

// replay makes a fork of the fixture and runs writes in it, in order.
func (t *pgTemplate) replay(ctx context.Context, writes []string, lim limits) (forkConn, error) {
	child, err := t.fork(ctx)
	if err != nil {
		return nil, err
	}
	for i, sql := range writes {
		if _, err := child.query(ctx, sql, lim); err != nil {
			child.close()
			return nil, fmt.Errorf("sqldb: postgres: replaying the parent's statement %d (%.80s) in the new fork: %w", i+1, sql, err)
		}
	}
	return child, nil
}

// pgParked is a snapshot kept as the statements that made its state
// (DB.Snapshot): no connection and no slot until its first call, which
// replays them in a fork of its own; a snapshot of it before then is
// parked too, a fork of it is made at once. Its DB serializes the calls.
type pgParked struct {
	t      *pgTemplate
	writes []string
	lim    limits
	f      forkConn // the fork, once made
}

// made returns the fork, making it on the first call; an error leaves the
// snapshot parked, for the next call to try again.
func (p *pgParked) made(ctx context.Context) (forkConn, error) {
	if p.f == nil {
		f, err := p.t.replay(ctx, p.writes, p.lim)
		if err != nil {
			return nil, err
		}
		p.f = f
	}
	return p.f, nil
}

func (p *pgParked) query(ctx context.Context, src string, lim limits) (*Result, error) {
	f, err := p.made(ctx)
	if err != nil {
		return nil, err
	}
	return f.query(ctx, src, lim)
}

func (p *pgParked) oracle(ctx context.Context, src string, lim limits) (*Result, error) {
	f, err := p.made(ctx)
	if err != nil {
		return nil, err
	}
	return f.oracle(ctx, src, lim)
}

func (p *pgParked) tables(ctx context.Context) ([]Table, error) {
	f, err := p.made(ctx)
	if err != nil {
		return nil, err
	}
	return f.tables(ctx)
}

func (p *pgParked) variant(ctx context.Context, ch change, oracle string, queries []string, lim limits) ([]*Result, error) {
	f, err := p.made(ctx)
	if err != nil {
		return nil, err
	}
	return f.variant(ctx, ch, oracle, queries, lim)
}

func (p *pgParked) snapshot(ctx context.Context, writes []string, lim limits) (forkConn, error) {
	if p.f != nil {
		return p.f.snapshot(ctx, writes, lim)
	}
	return p.t.replay(ctx, writes, lim)
}

func (p *pgParked) park(writes []string, lim limits) forkConn {
	return &pgParked{t: p.t, writes: writes, lim: lim}
}

func (p *pgParked) lost() error {
	if p.f == nil {
		return nil
	}
	return p.f.lost()
}

func (p *pgParked) close() error {
	if p.f == nil {
		return nil
	}
	return p.f.close()
}

func (f *pgFork) lost() error { return f.broken }

func (f *pgFork) close() error {
	broken := f.broken != nil
	if !broken {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := f.c.Exec(ctx, "ROLLBACK").ReadAll()
		cancel()
		broken = err != nil
	}
	// A broken connection is closed: the server then aborts its
	// transaction, so the slot is pristine either way.
	f.t.release(f.c, f.slot, broken)
	return nil
}

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
