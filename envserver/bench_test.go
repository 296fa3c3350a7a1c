package envserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcprl/mcprl/envserver"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
)

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoadInProcess is BenchmarkLoad's baseline in the same run:
// the same query on 256 forks called concurrently in process
// (sandbox.Sandbox.Call), with no server and no WebSocket between.
func BenchmarkLoadInProcess(b *testing.B) {
	const sessions = 256
	fx, err := task.LoadFixture(fixturesDir + "/customers")
	if err != nil {
		b.Fatal(err)
	}
	f, err := sandbox.NewFactory(context.Background(), fx, sandbox.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	forks := make([]*sandbox.Sandbox, sessions)
	for i := range forks {
		if forks[i], err = f.Fork(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer forks[i].Close()
	}
	args := json.RawMessage(`{"sql": "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"}`)
	lat := make([][]time.Duration, sessions)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i, sb := range forks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if res, err := sb.Call(context.Background(), "query_database", args); err != nil || res.IsError {
					if err == nil {
						err = errors.New(sandbox.ResultText(res))
					}
					b.Errorf("call: %v", err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-us/call")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-us")
}

// BenchmarkLoad holds 256 concurrent WebSocket sessions, each in its own
// episode and fork, and runs b.N query_database steps across them as fast
// as they are answered (the clients run in this process, on the same cores
// as the server). It reports tools/call per second and the p50/p99 step
// latency a client sees (with every client always waiting, latency is
// sessions / throughput); then the same sessions offer 5,000 calls/s in
// all for 2 s, each client on its own schedule, and it reports the rate
// served and the p50/p99 latency at that load; then kills one client mid-episode (its socket closes) and lets
// another vanish (its socket stays open, silent) and reports how long
// each took to have its fork freed; then closes every session and reports
// the forks, sessions and goroutines left.
//
//	go test ./envserver -run '^$' -bench Load -benchtime 20000x
func BenchmarkLoad(b *testing.B) {
	const sessions = 256
	base := settle(0)
	srv, hs := newServer(b, envserver.Options{MaxSessions: sessions + 2})
	clients := make([]*client, sessions)
	for i := range clients {
		clients[i] = dial(b, hs)
		clients[i].observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	}
	msg, _ := json.Marshal(map[string]any{"type": "step", "data": call("SELECT COUNT(*) FROM customers WHERE status = 'inactive'")})
	lat := make([][]time.Duration, sessions)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := c.c.Write(ctx, websocket.MessageText, msg); err != nil {
					failed.Add(1)
					return
				}
				_, ans, err := c.c.Read(ctx)
				if err != nil || len(ans) < 22 || string(ans[:22]) != `{"type":"observation",` {
					failed.Add(1)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d clients failed", failed.Load())
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	// CPU time per call (server and clients: this process), which the
	// machine's other tenants do not stretch the way they stretch wall time.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-us/call")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-us")
	if st := srv.Stats(); st.ToolCalls < int64(len(all)) || st.OpenForks != sessions {
		b.Fatalf("stats %+v after %d calls", st, len(all))
	}

	// Paced: the same sessions offer pacedRate calls/s in all (each client
	// sends on its own schedule, as trainers do between generations) for
	// pacedFor; latency from send to answer.
	const pacedRate, pacedFor = 5000, 2 * time.Second
	interval := time.Duration(float64(time.Second) * sessions / pacedRate)
	paced := make([][]time.Duration, sessions)
	pstart := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			// Spread the clients' first sends over one interval.
			next := pstart.Add(interval * time.Duration(i) / sessions)
			for next.Before(pstart.Add(pacedFor)) {
				time.Sleep(time.Until(next))
				t0 := time.Now()
				if err := c.c.Write(ctx, websocket.MessageText, msg); err != nil {
					failed.Add(1)
					return
				}
				_, ans, err := c.c.Read(ctx)
				if err != nil || len(ans) < 22 || string(ans[:22]) != `{"type":"observation",` {
					failed.Add(1)
					return
				}
				paced[i] = append(paced[i], time.Since(t0))
				next = next.Add(interval)
			}
		}()
	}
	wg.Wait()
	pelapsed := time.Since(pstart)
	if failed.Load() > 0 {
		b.Fatalf("%d clients failed", failed.Load())
	}
	pall := slices.Concat(paced...)
	slices.Sort(pall)
	b.ReportMetric(float64(len(pall))/pelapsed.Seconds(), "paced-calls/s")
	b.ReportMetric(float64(pall[len(pall)/2].Microseconds()), "paced-p50-us")
	b.ReportMetric(float64(pall[len(pall)*99/100].Microseconds()), "paced-p99-us")

	// A killed client: its socket closes mid-episode.
	k := dial(b, hs)
	k.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	t0 := time.Now()
	k.c.CloseNow()
	if !waitFor(10*time.Second, func() bool { return srv.Stats().OpenForks == sessions }) {
		b.Fatalf("killed client's fork not freed: %+v", srv.Stats())
	}
	b.ReportMetric(float64(time.Since(t0).Milliseconds()), "killed-freed-ms")
	// A vanished client: its socket stays open and silent (a half-open
	// connection); on a server with a 1 s idle timeout, beside the loaded one.
	idle := time.Second
	isrv, ihs := newServer(b, envserver.Options{IdleTimeout: idle})
	v := dial(b, ihs)
	v.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
	t0 = time.Now()
	if !waitFor(idle+5*time.Second, func() bool { return isrv.Stats().OpenForks == 0 }) {
		b.Fatalf("vanished client's fork not freed: %+v", isrv.Stats())
	}
	b.ReportMetric(float64(time.Since(t0).Milliseconds()), "vanished-freed-ms")
	v.c.CloseNow()
	ihs.Close()
	isrv.Close()

	for _, c := range clients {
		c.close()
	}
	if !waitFor(10*time.Second, func() bool { s := srv.Stats(); return s.OpenForks == 0 && s.ActiveSessions == 0 }) {
		b.Fatalf("after closing every client: %+v", srv.Stats())
	}
	st := srv.Stats()
	hs.Close()
	if err := srv.Close(); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	b.ReportMetric(float64(st.OpenForks), "forks-left")
	b.ReportMetric(float64(st.ActiveSessions), "sessions-left")
	b.ReportMetric(float64(max(settle(base)-base, 0)), "goroutines-left")
}
