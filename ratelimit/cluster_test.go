package ratelimit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/ratelimit/redisstore"
)

// nodes answers n stores on one shared backend, each with its own
// connections, as n nodes would have: "postgres" (a migrated schema of the
// test server) or "redis" (the test Redis); it skips tb without one.
func nodes(tb testing.TB, backend string, n int) []ratelimit.Store {
	tb.Helper()
	out := make([]ratelimit.Store, n)
	switch backend {
	case "memory":
		m := ratelimit.NewMemory() // one process: its nodes share one memory
		for i := range out {
			out[i] = m
		}
	case "postgres":
		dsn := pgtest.SchemaDSN(tb, pgtest.DSN(tb))
		for i := range out {
			pool, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(pool.Close)
			if i == 0 {
				if err := postgres.New(pool).Migrate(context.Background()); err != nil {
					tb.Fatal(err)
				}
			}
			out[i] = postgres.NewRateLimits(pool)
		}
	case "redis":
		url := os.Getenv("TOOLPLANE_TEST_REDIS")
		if url == "" {
			url = "redis://127.0.0.1:6379/0"
		}
		for i := range out {
			s, err := redisstore.Open(url)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			if err := s.Ping(context.Background()); err != nil {
				tb.Skipf("no Redis at %s: %v", url, err)
			}
			out[i] = s
		}
	}
	return out
}

func uniqueKey() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "cluster:" + hex.EncodeToString(b)
}

// hammer sends one key's requests from workers goroutines on each of the
// stores (nodes) for d, each node deciding through its own Shared, and
// answers how many were admitted, how many decided in all, and how many
// fell back to a node's own limit.
func hammer(stores []ratelimit.Store, q ratelimit.Quota, workers int, d time.Duration) (admitted, decided, fellBack int64) {
	key := uniqueKey()
	var a, n, f atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for _, st := range stores {
		sh := ratelimit.NewShared(st, ratelimit.SharedOptions{Timeout: time.Second, Log: slog.New(slog.DiscardHandler), FellBack: func() { f.Add(1) }})
		for range workers {
			wg.Go(func() {
				for time.Now().Before(stop) {
					if sh.Take(context.Background(), key, q, time.Now()).Allowed {
						a.Add(1)
					}
					n.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return a.Load(), n.Load(), f.Load()
}

// Three nodes sharing a store, hammering one key, admit between them the
// key's configured rate (its burst, then one request per interval) within
// 10%, not three times it.
func TestThreeNodesHoldOneLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("hammers a shared store for seconds")
	}
	t.Parallel()
	q := ratelimit.Quota{Limit: 50, Window: time.Second} // 50 a second
	const d = 3 * time.Second
	for _, backend := range []string{"postgres", "redis"} {
		t.Run(backend, func(t *testing.T) {
			stores := nodes(t, backend, 3)
			admitted, decided, fellBack := hammer(stores, q, 4, d)
			want := float64(q.Limit) + float64(d)/float64(q.Interval())
			off := math.Abs(float64(admitted)-want) / want
			t.Logf("%s: 3 nodes admitted %d of %d requests in %v; the rate allows %.0f (off by %.1f%%), %d fallbacks", backend, admitted, decided, d, want, 100*off, fellBack)
			if fellBack > 0 {
				t.Fatalf("%d decisions fell back to a node's own limit", fellBack)
			}
			if off > 0.10 || decided < 3*int64(want) {
				t.Fatalf("admitted %d of %d, want %.0f within 10%% (and the key hammered well past it)", admitted, decided, want)
			}
		})
	}
}

// BenchmarkDecision is the cost of one decision on each store, side by
// side: memory (one node), PostgreSQL and Redis (shared, one round trip).
// Run with -benchmem.
func BenchmarkDecision(b *testing.B) {
	for _, backend := range []string{"memory", "postgres", "redis"} {
		b.Run(backend, func(b *testing.B) {
			sh := ratelimit.NewShared(nodes(b, backend, 1)[0], ratelimit.SharedOptions{Timeout: time.Second, Log: slog.New(slog.DiscardHandler)})
			// A quota no benchmark spends: every decision admits and writes.
			l := sh.Limiter("bench", math.MaxInt32, time.Minute)
			key := uniqueKey()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				l.Allow(key, time.Now())
			}
		})
	}
}

// BenchmarkThreeNodesAccuracy reports how close three nodes sharing a
// store hold one key to its rate (admitted/allowed, 1 is exact), hammered
// for 3 seconds per iteration.
func BenchmarkThreeNodesAccuracy(b *testing.B) {
	q := ratelimit.Quota{Limit: 50, Window: time.Second}
	const d = 3 * time.Second
	for _, backend := range []string{"postgres", "redis"} {
		b.Run(backend, func(b *testing.B) {
			stores := nodes(b, backend, 3)
			var ratio float64
			var decided int64
			for b.Loop() {
				admitted, n, _ := hammer(stores, q, 4, d)
				ratio = float64(admitted) / (float64(q.Limit) + float64(d)/float64(q.Interval()))
				decided = n
			}
			b.ReportMetric(ratio, "admitted/allowed")
			b.ReportMetric(float64(decided)/d.Seconds(), "decisions/s")
		})
	}
}
