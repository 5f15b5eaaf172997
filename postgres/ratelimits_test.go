package postgres

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/ratelimit/ratelimittest"
)

func TestRateLimitsConformance(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	rl := NewRateLimits(s.pool)
	ratelimittest.Run(t, func(*testing.T) ratelimit.Store { return rl })
}

// The statements hold on the simple protocol too, as a transaction-pooling
// proxy (PgBouncer) needs: the intervals travel as text.
func TestRateLimitsConformanceSimpleProtocol(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	if err := New(openPool(t, schema)).Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	rl := NewRateLimits(openPoolMode(t, pgx.QueryExecModeSimpleProtocol, schema))
	ratelimittest.Run(t, func(*testing.T) ratelimit.Store { return rl })
}

// Sweep deletes the rows of whole budgets and keeps the others.
func TestRateLimitsSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	rl := NewRateLimits(s.pool)
	// The first Take starts a sweep of its own off the decision's path; a
	// slow host can run it after a short budget is whole and leave this
	// sweep one row short, so this node has just swept.
	rl.swept.Store(time.Now().UnixNano())
	short := ratelimit.Quota{Limit: 10, Window: 100 * time.Millisecond}
	long := ratelimit.Quota{Limit: 10, Window: time.Hour}
	for _, k := range []string{"a", "b"} {
		if _, err := rl.Take(ctx, k, short, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rl.Take(ctx, "c", long, time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	n, err := rl.Sweep(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want the 2 whole budgets", n, err)
	}
	var left int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM rate_limits`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("rows left = %d, %v; want 1", left, err)
	}
}

// With the database gone (a pool on a port nobody listens on), a node
// limits on its own: never open, and each such decision counted.
func TestRateLimitsGoneDatabaseFallsBackToTheNodesLimit(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@"+addr+"/test?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var fellBack atomic.Int64
	sh := ratelimit.NewShared(NewRateLimits(pool), ratelimit.SharedOptions{Name: "postgres", Log: slog.New(slog.DiscardHandler), FellBack: func() { fellBack.Add(1) }})
	l := sh.Limiter("key", 2, time.Hour)
	var allowed int
	for range 5 {
		if l.Allow("k", time.Now()).Allowed {
			allowed++
		}
	}
	if allowed != 2 || fellBack.Load() != 5 {
		t.Fatalf("admitted %d and fell back %d times, want 2 and 5", allowed, fellBack.Load())
	}
}
