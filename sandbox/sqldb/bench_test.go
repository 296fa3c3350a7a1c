package sqldb

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/mcprl/mcprl/internal/pgtest"
)

// Benchmarks: Fork against rebuilding the database from schema.sql and
// data.sql, both measured in the same run; the ratio is reported as
// "x-vs-rebuild" (how many times faster a fork is). Run:
//
//	source .ci/env && go test ./sandbox/sqldb -run '^$' -bench . -benchtime 2000x

// rebuilds is how many rebuilds the baseline averages over.
const rebuilds = 30

func benchBackend(b *testing.B, f func(b *testing.B, dsn string)) {
	b.Run("sqlite", func(b *testing.B) { f(b, "") })
	b.Run("postgres", func(b *testing.B) {
		if os.Getenv(pgtestEnv) == "" && os.Getenv("CI") == "" {
			b.Skip("no PostgreSQL (source .ci/env)")
		}
		f(b, pgtest.DSN(b))
	})
}

const pgtestEnv = pgtest.EnvVar

// rebuildOnce builds the fixture from its SQL the way a template does,
// without forking, and returns how long the build took: a fresh private
// SQLite connection, or (PostgreSQL, on an open connection) a fresh schema
// in a transaction that is then rolled back.
func rebuildOnce(b *testing.B, tpl *Template, schema, data string) time.Duration {
	ctx := context.Background()
	switch be := tpl.be.(type) {
	case *sqliteTemplate:
		start := time.Now()
		sc, c, err := be.open(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, schema, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, data, nil); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		be.discard(sc)
		return d
	case *pgTemplate:
		c, err := be.connect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		start := time.Now()
		for _, s := range []string{"BEGIN; CREATE SCHEMA mcprl_bench_rebuild; SET LOCAL search_path = mcprl_bench_rebuild", schema, data} {
			if _, err := c.Exec(ctx, s).ReadAll(); err != nil {
				b.Fatal(err)
			}
		}
		d := time.Since(start)
		if _, err := c.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	panic("unknown backend")
}

// baseline is the mean rebuild time after one warm-up.
func baseline(b *testing.B, tpl *Template) time.Duration {
	schema, data := fixtureSQL(b)
	rebuildOnce(b, tpl, schema, data)
	var total time.Duration
	for i := 0; i < rebuilds; i++ {
		total += rebuildOnce(b, tpl, schema, data)
	}
	return total / rebuilds
}

// BenchmarkFork measures Fork (ns/op; Close is outside the timer) and the
// rebuild baseline, and reports their ratio.
func BenchmarkFork(b *testing.B) {
	benchBackend(b, func(b *testing.B, dsn string) {
		tpl := newTemplate(b, dsn, Options{})
		ctx := context.Background()
		rebuild := baseline(b, tpl)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			db, err := tpl.Fork(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			db.Close()
			b.StartTimer()
		}
		b.StopTimer()
		fork := b.Elapsed() / time.Duration(b.N)
		b.ReportMetric(float64(rebuild.Nanoseconds()), "rebuild-ns")
		b.ReportMetric(float64(rebuild)/float64(fork), "x-vs-rebuild")
	})
}

// BenchmarkCycle measures a whole trajectory's database life: Fork, one
// DELETE, one SELECT, Close.
func BenchmarkCycle(b *testing.B) {
	benchBackend(b, func(b *testing.B, dsn string) {
		tpl := newTemplate(b, dsn, Options{})
		ctx := context.Background()
		rebuild := baseline(b, tpl)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			db, err := tpl.Fork(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := db.Query(ctx, "DELETE FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE LOWER(TRIM(status)) = 'inactive')"); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Query(ctx, "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"); err != nil {
				b.Fatal(err)
			}
			db.Close()
		}
		b.StopTimer()
		cycle := b.Elapsed() / time.Duration(b.N)
		b.ReportMetric(float64(rebuild.Nanoseconds()), "rebuild-ns")
		b.ReportMetric(float64(rebuild)/float64(cycle), "x-vs-rebuild")
	})
}

// BenchmarkForkOfFork measures DB.Fork of a fork after a few writes (the
// state a trajectory leaves at a setback): SQLite serializes the fork,
// PostgreSQL replays its writes in a fresh slot. Goals: under 1 ms and
// 20 ms.
func BenchmarkForkOfFork(b *testing.B) {
	benchBackend(b, func(b *testing.B, dsn string) {
		tpl := newTemplate(b, dsn, Options{})
		ctx := context.Background()
		parent := fork(b, tpl)
		for _, sql := range []string{
			"UPDATE customers SET status = 'inactive' WHERE LOWER(TRIM(status)) = 'inactive'",
			"DELETE FROM orders WHERE total > 100",
			"INSERT INTO orders (id, customer_id, total, placed_at) VALUES (900, 1, 5, '2025-01-01')",
		} {
			query(b, parent, sql)
		}
		var lat []time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			child, err := parent.Fork(ctx)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
			b.StopTimer()
			child.Close()
			b.StartTimer()
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
	})
}
