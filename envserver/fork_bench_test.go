package envserver_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcprl/mcprl/envserver"
	"github.com/mcprl/mcprl/internal/pgtest"
)

// BenchmarkForkEpisode measures {"type": "fork"} of an episode after three
// writes, from the client's send to the answer, on SQLite and PostgreSQL
// (goals: under 1 ms and 20 ms), the forks piling up: each holds a session
// slot until the server closes. On PostgreSQL a fork is parked
// (sqldb.DB.Snapshot: no connection or slot schema while it waits), and
// the cost moves to a reset from it, which takes a slot and replays the
// writes: reset-p50-us times a reset from each fork and its first query
// on one connection (each reset frees the previous episode's slot).
//
//	go test ./envserver -run '^$' -bench ForkEpisode -benchtime 40x
func BenchmarkForkEpisode(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			dsn := ""
			if backend == "postgres" {
				dsn = pgtest.DSN(b)
			}
			srv, hs := newServer(b, envserver.Options{DSN: dsn, MaxSessions: b.N + 8})
			c := dial(b, hs)
			defer c.close()
			c.observation("reset", map[string]any{"task_id": "customers-inactive-001"})
			for _, sql := range []string{
				"UPDATE customers SET status = 'inactive' WHERE LOWER(TRIM(status)) = 'inactive'",
				"DELETE FROM orders WHERE total > 100",
				"INSERT INTO orders (id, customer_id, total, placed_at) VALUES (900, 1, 5, '2025-01-01')",
			} {
				c.observation("step", call(sql))
			}
			lat := make([]time.Duration, 0, b.N)
			ids := make([]string, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				r := c.send("fork", nil)
				if r.Type != "fork" {
					b.Fatalf("fork: %s %s", r.Type, r.Data)
				}
				lat = append(lat, time.Since(t0))
				var fr envserver.ForkResult
				json.Unmarshal(r.Data, &fr)
				ids = append(ids, fr.ForkID)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
			k := dial(b, hs)
			defer k.close()
			reset := make([]time.Duration, 0, b.N)
			for _, id := range ids {
				t0 := time.Now()
				k.observation("reset", map[string]any{"fork_id": id})
				k.observation("step", call("SELECT COUNT(*) FROM orders"))
				reset = append(reset, time.Since(t0))
			}
			slices.Sort(reset)
			b.ReportMetric(float64(reset[len(reset)/2].Microseconds()), "reset-p50-us")
			if st := srv.Stats(); st.OpenEpisodeForks != int64(b.N) {
				b.Fatalf("stats %+v after %d forks", st, b.N)
			}
		})
	}
}

// BenchmarkLoadForks: 256 WebSocket sessions each run an episode with two
// writes and then, 4 times, fork it, start an episode from the fork and
// query it, all at once; afterwards every client goes and the forks expire
// (1 s idle timeout): nothing is left (forks, forks of episodes, sessions,
// goroutines).
//
//	go test ./envserver -run '^$' -bench LoadForks -benchtime 1x
func BenchmarkLoadForks(b *testing.B) {
	const sessions, forksEach = 256, 4
	base := settle(0)
	srv, hs := newServer(b, envserver.Options{MaxSessions: sessions*(forksEach+1) + 8, IdleTimeout: time.Second})
	for range b.N {
		clients := make([]*client, sessions)
		for i := range clients {
			clients[i] = dial(b, hs)
		}
		fork, _ := json.Marshal(map[string]any{"type": "fork"})
		var failed atomic.Int64
		var wg sync.WaitGroup
		lat := make([][]time.Duration, sessions)
		start := time.Now()
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				roundTrip := func(msg []byte) (reply, bool) {
					if c.c.Write(ctx, websocket.MessageText, msg) != nil {
						return reply{}, false
					}
					_, ans, err := c.c.Read(ctx)
					var r reply
					return r, err == nil && json.Unmarshal(ans, &r) == nil && r.Type != "error"
				}
				send := func(typ string, data any) (reply, bool) {
					msg, _ := json.Marshal(map[string]any{"type": typ, "data": data})
					return roundTrip(msg)
				}
				ok := true
				_, ok1 := send("reset", map[string]any{"task_id": "customers-inactive-001"})
				_, ok2 := send("step", call("DELETE FROM orders WHERE id <= 5"))
				_, ok3 := send("step", call("UPDATE customers SET country = 'ZZ' WHERE id = 1"))
				ok = ok1 && ok2 && ok3
				for k := 0; ok && k < forksEach; k++ {
					t0 := time.Now()
					r, fine := roundTrip(fork)
					lat[i] = append(lat[i], time.Since(t0))
					var fr envserver.ForkResult
					if !fine || json.Unmarshal(r.Data, &fr) != nil {
						ok = false
						break
					}
					_, ok1 = send("reset", map[string]any{"fork_id": fr.ForkID})
					_, ok2 = send("step", call("SELECT COUNT(*) FROM orders"))
					ok = ok1 && ok2
				}
				if !ok {
					failed.Add(1)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		if failed.Load() > 0 {
			b.Fatalf("%d sessions failed", failed.Load())
		}
		all := slices.Concat(lat...)
		slices.Sort(all)
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "forks/s")
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "fork-p50-us")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "fork-p99-us")
		if st := srv.Stats(); st.EpisodeForks < int64(sessions*forksEach) {
			b.Fatalf("stats %+v", st)
		}
		for _, c := range clients {
			c.close()
		}
	}
	if !waitFor(15*time.Second, func() bool {
		s := srv.Stats()
		return s.OpenForks == 0 && s.OpenEpisodeForks == 0 && s.ActiveSessions == 0
	}) {
		b.Fatalf("after every client went: %+v", srv.Stats())
	}
	st := srv.Stats()
	hs.Close()
	if err := srv.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.OpenForks+st.OpenEpisodeForks), "forks-left")
	b.ReportMetric(float64(st.ActiveSessions), "sessions-left")
	b.ReportMetric(float64(max(settle(base)-base, 0)), "goroutines-left")
}
