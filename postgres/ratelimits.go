package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/ratelimit"
)

// RateLimits is a ratelimit.Store on PostgreSQL, shared by every node of
// the database: each decision is one statement, atomic on the key's row,
// and decided on the database's clock (now()), so the nodes' clocks never
// matter. Rows of keys whose budgets are whole are swept now and then.
type RateLimits struct {
	pool *pgxpool.Pool
	// swept is when (Unix nanoseconds) this node last swept.
	swept atomic.Int64
}

var _ ratelimit.Store = (*RateLimits)(nil)

// rateSweepEvery is how often a node sweeps the rows of whole budgets.
const rateSweepEvery = time.Minute

// NewRateLimits answers the rate limits kept on pool, whose schema is
// migrated (Store.Migrate).
func NewRateLimits(pool *pgxpool.Pool) *RateLimits { return &RateLimits{pool: pool} }

// takeRate is GCRA in one statement: $2 is the quota's interval, $3 its
// window. A key's TAT, pushed an interval later, may lie at most a window
// ahead of now(); a refusal leaves it as it was.
const takeRate = `INSERT INTO rate_limits AS r (key, tat) VALUES ($1, now() + $2::interval)
ON CONFLICT (key) DO UPDATE SET
	tat = CASE WHEN greatest(r.tat, now()) + $2::interval <= now() + $3::interval
		THEN greatest(r.tat, now()) + $2::interval ELSE r.tat END,
	admitted = greatest(r.tat, now()) + $2::interval <= now() + $3::interval
RETURNING admitted, greatest(r.tat - now(), interval '0')`

// Take decides one request of key under q (ratelimit.Store).
func (r *RateLimits) Take(ctx context.Context, key string, q ratelimit.Quota, _ time.Time) (ratelimit.State, error) {
	r.maybeSweep()
	var s ratelimit.State
	if err := r.pool.QueryRow(ctx, takeRate, key, q.Interval(), q.Window).Scan(&s.Allowed, &s.Ahead); err != nil {
		return ratelimit.State{}, fmt.Errorf("take a rate-limit decision: %w", err)
	}
	return s, nil
}

// repeatRate moves one counted request of a key to its retry budget, when
// the key has one counted and room in its retry budget.
const repeatRate = `UPDATE rate_limits SET tat = greatest(tat - $2::interval, now()),
	retry_tat = greatest(retry_tat, now()) + $2::interval
WHERE key = $1 AND tat > now() AND greatest(retry_tat, now()) + $2::interval <= now() + $3::interval`

// Repeat moves one request of key to its retry budget (ratelimit.Store).
func (r *RateLimits) Repeat(ctx context.Context, key string, q ratelimit.Quota, _ time.Time) (bool, error) {
	tag, err := r.pool.Exec(ctx, repeatRate, key, q.Interval(), q.Window)
	if err != nil {
		return false, fmt.Errorf("move a request to its retry budget: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Sweep deletes the rows of keys whose budgets are both whole (a missing
// row reads the same) and answers how many.
func (r *RateLimits) Sweep(ctx context.Context) (int64, error) {
	tag, err := r.pool.Exec(ctx, `DELETE FROM rate_limits WHERE tat <= now() AND retry_tat <= now()`)
	if err != nil {
		return 0, fmt.Errorf("sweep rate limits: %w", err)
	}
	return tag.RowsAffected(), nil
}

// maybeSweep starts a sweep, off the decision's path, when this node has
// not swept for rateSweepEvery.
func (r *RateLimits) maybeSweep() {
	now := time.Now().UnixNano()
	last := r.swept.Load()
	if now-last < int64(rateSweepEvery) || !r.swept.CompareAndSwap(last, now) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = r.Sweep(ctx) // the next sweep retries; a stale row costs nothing
	}()
}
