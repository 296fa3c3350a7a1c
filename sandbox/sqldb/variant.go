package sqldb

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Variants runs the trusted oracle and the untrusted queries on n variants
// of the fork's current data and returns out[i][j]: on variant i, the
// oracle's result (j = 0) and each query's (j = 1...), nil where that
// statement failed there. Variant i deletes a deterministic share (about
// half) of every table's rows, chosen by i; the fork's state is unchanged
// afterwards. Each query runs read-only under the policy's confinement,
// within the same caps as Query.
//
// Two queries that return the same result on the live data but different
// ones on a variant compute different things: the live agreement was a
// coincidence of the data (test-suite accuracy, Zhong et al. 2020). A
// reward uses it to tell a query that answers the question from one that
// happens to return the same value.
func (d *DB) Variants(ctx context.Context, n int, oracle string, queries []string) ([][]*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	tables, err := d.fc.tables(ctx)
	if err != nil {
		return nil, err
	}
	return variants(ctx, d.fc, tables, n, oracle, queries, d.lim)
}

// Witnessed runs the trusted oracle and the untrusted queries once, on a
// copy of the fork's current data that the trusted statements in setup
// changed first, and returns the oracle's result (0) and each query's
// (1...), nil where that query failed there; the fork's state is unchanged
// afterwards. The queries run as in Variants.
//
// Removing rows cannot tell apart two queries that both return nothing: a
// question whose answer is empty (nobody has that manager, no order is that
// late) is matched by any query that returns no rows, or by SELECT 0. Setup
// adds the rows such a question asks about (a task's witness_sql), so that
// the oracle's answer is no longer empty and only a query that asks the
// same question agrees with it. A setup statement that fails is skipped,
// so that one list can serve both dialects (a statement only PostgreSQL
// needs, such as dropping a foreign key, fails on SQLite); whether the
// statements did their job shows in the oracle's result. On SQLite the
// copy's foreign keys are deferred (the copy is never committed); on
// PostgreSQL, whose constraints defer only where they were declared
// DEFERRABLE, setup drops the one it must break.
func (d *DB) Witnessed(ctx context.Context, setup []string, oracle string, queries []string) ([]*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	return witnessed(ctx, d.fc, setup, oracle, queries, d.lim)
}

// change is what a variant does to the data before the oracle and the
// queries run on it: the setup statements when there are any, else the
// deletion of variant thin's share of every table's rows.
type change struct {
	thin   int
	tables []Table
	setup  []string
}

// variants runs the oracle and the queries on variants 0..n-1 of fc's data.
func variants(ctx context.Context, fc forkConn, tables []Table, n int, oracle string, queries []string, lim limits) ([][]*Result, error) {
	out := make([][]*Result, n)
	for i := range n {
		var err error
		if out[i], err = fc.variant(ctx, change{thin: i, tables: tables}, oracle, queries, lim); err != nil {
			return nil, fmt.Errorf("sqldb: variant %d: %w", i, err)
		}
	}
	return out, nil
}

// witnessed runs the oracle and the queries on fc's data changed by setup.
func witnessed(ctx context.Context, fc forkConn, setup []string, oracle string, queries []string, lim limits) ([]*Result, error) {
	if len(setup) == 0 {
		return nil, errors.New("sqldb: a witnessed variant needs setup statements")
	}
	out, err := fc.variant(ctx, change{setup: setup}, oracle, queries, lim)
	if err != nil {
		return nil, fmt.Errorf("sqldb: witnessed variant: %w", err)
	}
	return out, nil
}

// thinSQLite and thinPG delete a row of a variant by a hash of its rowid
// (SQLite) or ctid (PostgreSQL) and the variant's number. PostgreSQL's goes
// row by row, each in its own subtransaction, so that a row a foreign key
// protects stays and the others still go; SQLite, whose foreign keys are
// off unless a fixture turns them on, falls back to that in Go.
const (
	thinSQLite    = `DELETE FROM %s WHERE ` + thinSQLiteRow
	thinSQLiteIDs = `SELECT rowid FROM %s WHERE ` + thinSQLiteRow
	thinSQLiteRow = `((rowid * 1103515245 + %d) / 65536) %% 2 = 0`
	thinPG        = `DO $mcprl$ DECLARE r record; BEGIN
  FOR r IN SELECT ctid FROM %[1]s WHERE ('x' || substr(md5(ctid::text || '%[2]d'), 1, 8))::bit(32)::int %% 2 = 0 LOOP
    BEGIN DELETE FROM %[1]s WHERE ctid = r.ctid; EXCEPTION WHEN integrity_constraint_violation THEN NULL; END;
  END LOOP;
END $mcprl$`
)

// thin deletes variant i's share of table's rows, row by row where the
// whole statement fails (a foreign key protects some of them).
func (f *sqliteFork) thin(ctx context.Context, table string, i int, exec func(string) error) {
	name, salt := quoteIdent(table), 12345*(i+1)
	if exec(fmt.Sprintf(thinSQLite, name, salt)) == nil {
		return
	}
	var ids []int64
	_ = f.sc.Raw(func(any) error {
		rows, err := f.c.QueryContext(ctx, fmt.Sprintf(thinSQLiteIDs, name, salt), nil)
		if err != nil {
			return err // a table without a rowid stays whole
		}
		defer rows.Close()
		dest := make([]driver.Value, 1)
		for rows.Next(dest) == nil {
			if id, ok := dest[0].(int64); ok {
				ids = append(ids, id)
			}
		}
		return nil
	})
	for _, id := range ids {
		_ = exec(fmt.Sprintf("DELETE FROM %s WHERE rowid = %d", name, id))
	}
}

func (f *sqliteFork) variant(ctx context.Context, ch change, oracle string, queries []string, lim limits) ([]*Result, error) {
	exec := func(sql string) error {
		return f.sc.Raw(func(any) error {
			_, err := f.c.ExecContext(ctx, sql, nil)
			return err
		})
	}
	if err := exec("SAVEPOINT mcprl_variant"); err != nil {
		return nil, err
	}
	if ch.setup != nil {
		// The copy is never committed: its foreign keys are checked at a
		// commit that does not come, so setup can add the orphan a
		// question about orphans asks for. Only this trusted statement gets
		// past the authorizer, and only here.
		f.deferFK = true
		err := exec("PRAGMA defer_foreign_keys = ON")
		f.deferFK = false
		if err != nil {
			return nil, errors.Join(err, exec("ROLLBACK TO mcprl_variant"), exec("RELEASE mcprl_variant"))
		}
	}
	for _, st := range ch.setup {
		_ = exec(st) // a statement fails alone (SQLite undoes it); the oracle shows what the rest did
	}
	if ch.setup == nil {
		for _, t := range ch.tables {
			f.thin(ctx, t.Name, ch.thin, exec)
		}
	}
	out := make([]*Result, 1+len(queries))
	var err error
	f.readOnly = true
	for j, q := range append([]string{oracle}, queries...) {
		var res *Result
		if j == 0 {
			res, err = f.run(ctx, q, lim)
		} else {
			res, err = f.query(ctx, q, lim)
		}
		var qe *QueryError
		if errors.As(err, &qe) {
			err = nil
			continue
		}
		if err != nil {
			break
		}
		out[j] = res
	}
	f.readOnly = false
	if rerr := exec("ROLLBACK TO mcprl_variant"); rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	if rerr := exec("RELEASE mcprl_variant"); rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	if ch.setup != nil {
		// RELEASE ended the transaction SAVEPOINT began, which turns the
		// deferral off; this makes sure of it.
		f.deferFK = true
		rerr := exec("PRAGMA defer_foreign_keys = OFF")
		f.deferFK = false
		if rerr != nil {
			return nil, errors.Join(err, rerr)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (f *pgFork) variant(ctx context.Context, ch change, oracle string, queries []string, lim limits) ([]*Result, error) {
	if f.broken != nil {
		return nil, fmt.Errorf("sqldb: postgres: fork unusable: %w", f.broken)
	}
	out := make([]*Result, 1+len(queries))
	// One savepoint around the whole variant, always rolled back; one inside
	// it around each statement, so that a failing statement (a foreign key
	// that protects a row, a query's SQL error) costs only itself.
	_, err := f.inSavepoint(ctx, lim, true, func(cctx context.Context) (*Result, error) {
		step := func(fn func() error) (bool, error) {
			if _, err := f.c.Exec(cctx, "SAVEPOINT mcprl_v").ReadAll(); err != nil {
				return false, err
			}
			ferr := fn()
			end := "RELEASE SAVEPOINT mcprl_v"
			if ferr != nil {
				end = "ROLLBACK TO SAVEPOINT mcprl_v; RELEASE SAVEPOINT mcprl_v"
			}
			if _, err := f.c.Exec(cctx, end).ReadAll(); err != nil {
				return false, errors.Join(ferr, err)
			}
			var pe *pgconn.PgError
			if ferr != nil && !errors.As(ferr, &pe) {
				return false, ferr // not the statement's fault: the call's time, the connection
			}
			return ferr == nil, nil
		}
		for _, st := range ch.setup {
			// A statement that fails costs only itself, as a thinning one.
			if _, err := step(func() error {
				_, err := f.c.Exec(cctx, st).ReadAll()
				return err
			}); err != nil {
				return nil, err
			}
		}
		for _, t := range ch.tables {
			if ch.setup != nil {
				break
			}
			if _, err := step(func() error {
				_, err := f.c.Exec(cctx, fmt.Sprintf(thinPG, quoteIdent(t.Name), ch.thin)).ReadAll()
				return err
			}); err != nil {
				return nil, err
			}
		}
		for j, q := range append([]string{oracle}, queries...) {
			if j > 0 && checkPG(q) != nil {
				continue
			}
			var res *Result
			ok, err := step(func() error {
				var err error
				res, err = f.collect(cctx, q, lim)
				return err
			})
			if err != nil {
				return nil, err
			}
			if ok {
				out[j] = res
			}
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
