package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/ratelimit/ratelimittest"
)

func TestRateLimitsConformance(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	rl := NewRateLimits(s.pool)
	ratelimittest.Run(t, func(*testing.T) ratelimit.Store { return rl })
}

// Sweep deletes the rows of whole budgets and keeps the others.
func TestRateLimitsSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	rl := NewRateLimits(s.pool)
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
