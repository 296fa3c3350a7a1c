package sandbox

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprl/mcprl/internal/pgtest"
	"github.com/mcprl/mcprl/task"
)

// BenchmarkToolsCall measures an in-process tools/call of query_database
// with Sandbox.Call (the built-in tool's handler called in process, then
// sqldb) against the same query run directly on the fork with
// (*sqldb.DB).Query, alternating them in one run; it also runs the call as a
// JSON-RPC round trip over the sandbox's MCP session (client session ->
// in-memory transport -> server -> back), and over the SDK's own in-memory
// transport (net.Pipe). It reports the medians and the ratios to the direct
// query.
func BenchmarkToolsCall(b *testing.B) { benchToolsCall(b, "") }

// BenchmarkToolsCallPostgres is BenchmarkToolsCall on PostgreSQL.
func BenchmarkToolsCallPostgres(b *testing.B) { benchToolsCall(b, pgtest.DSN(b)) }

func benchToolsCall(b *testing.B, dsn string) {
	fx := loadCustomers(b)
	s := fork(b, newFactory(b, fx, Options{DSN: dsn}))
	sp := fork(b, newFactory(b, fx, Options{DSN: dsn, SDKPipe: true}))
	ctx := context.Background()
	const sql = "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"
	args := json.RawMessage(`{"sql": "` + sql + `"}`)
	direct := make([]time.Duration, 0, b.N)
	viaCall := make([]time.Duration, 0, b.N)
	viaMCP := make([]time.Duration, 0, b.N)
	viaPipe := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := s.DB().Query(ctx, sql); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := s.Call(ctx, task.ToolQueryDatabase, args)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
		t2 := time.Now()
		res, err = s.Session().CallTool(ctx, &mcp.CallToolParams{Name: task.ToolQueryDatabase, Arguments: args})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
		t3 := time.Now()
		res, err = sp.Call(ctx, task.ToolQueryDatabase, args)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
		direct = append(direct, t1.Sub(t0))
		viaCall = append(viaCall, t2.Sub(t1))
		viaMCP = append(viaMCP, t3.Sub(t2))
		viaPipe = append(viaPipe, time.Since(t3))
	}
	b.StopTimer()
	pd, pc, pm, pp := median(direct), median(viaCall), median(viaMCP), median(viaPipe)
	b.ReportMetric(float64(pd.Nanoseconds())/1e3, "direct-p50-us")
	b.ReportMetric(float64(pc.Nanoseconds())/1e3, "call-p50-us")
	b.ReportMetric(float64(pm.Nanoseconds())/1e3, "mcp-p50-us")
	b.ReportMetric(float64(pp.Nanoseconds())/1e3, "sdkpipe-p50-us")
	b.ReportMetric(float64(pc)/float64(pd), "ratio")
	b.ReportMetric(float64(pm)/float64(pd), "mcp-ratio")
	b.ReportMetric(float64(pp)/float64(pd), "sdkpipe-ratio")
}

// BenchmarkFork measures a sandbox's Fork+Close (database fork, MCP server,
// client session) against the database fork alone.
func BenchmarkFork(b *testing.B) {
	f := newFactory(b, loadCustomers(b), Options{})
	ctx := context.Background()
	direct := make([]time.Duration, 0, b.N)
	sandbox := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		db, err := f.tmpl.Fork(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s, err := f.Fork(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		direct = append(direct, t1.Sub(t0))
		sandbox = append(sandbox, time.Since(t1))
	}
	b.StopTimer()
	pd, ps := median(direct), median(sandbox)
	b.ReportMetric(float64(pd.Nanoseconds())/1e3, "dbfork-p50-us")
	b.ReportMetric(float64(ps.Nanoseconds())/1e3, "sandbox-p50-us")
	b.ReportMetric(float64(ps)/float64(pd), "ratio")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
