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

// variants runs the oracle and the queries on variants 0..n-1 of fc's data.
func variants(ctx context.Context, fc forkConn, tables []Table, n int, oracle string, queries []string, lim limits) ([][]*Result, error) {
	out := make([][]*Result, n)
	for i := range n {
		var err error
		if out[i], err = fc.variant(ctx, i, tables, oracle, queries, lim); err != nil {
			return nil, fmt.Errorf("sqldb: variant %d: %w", i, err)
		}
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

func (f *sqliteFork) variant(ctx context.Context, i int, tables []Table, oracle string, queries []string, lim limits) ([]*Result, error) {
	exec := func(sql string) error {
		return f.sc.Raw(func(any) error {
			_, err := f.c.ExecContext(ctx, sql, nil)
			return err
		})
	}
	if err := exec("SAVEPOINT mcprl_variant"); err != nil {
		return nil, err
	}
	for _, t := range tables {
		f.thin(ctx, t.Name, i, exec)
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
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (f *pgFork) variant(ctx context.Context, i int, tables []Table, oracle string, queries []string, lim limits) ([]*Result, error) {
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
		for _, t := range tables {
			if _, err := step(func() error {
				_, err := f.c.Exec(cctx, fmt.Sprintf(thinPG, quoteIdent(t.Name), i)).ReadAll()
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
