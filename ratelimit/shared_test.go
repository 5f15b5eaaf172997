package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/ratelimit"
)

// flaky is a store that fails while down is set, and otherwise is a
// Memory (the real-store fallbacks are tested in postgres and redisstore).
type flaky struct {
	*ratelimit.Memory
	down  atomic.Bool
	calls atomic.Int64
}

var errDown = errors.New("store down")

func (f *flaky) Take(ctx context.Context, key string, q ratelimit.Quota, now time.Time) (ratelimit.State, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return ratelimit.State{}, errDown
	}
	return f.Memory.Take(ctx, key, q, now)
}

func (f *flaky) Repeat(ctx context.Context, key string, q ratelimit.Quota, now time.Time) (bool, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return false, errDown
	}
	return f.Memory.Repeat(ctx, key, q, now)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A store that fails leaves each decision to the node's own limit: still
// a limit (never open), counted each time, logged once per LogEvery, and
// the store is asked again, by itself, once RetryAfter has passed.
func TestSharedFallsBackToTheNodesOwnLimitAndRecovers(t *testing.T) {
	t.Parallel()
	store := &flaky{Memory: ratelimit.NewMemory()}
	var logs syncBuffer
	var fellBack atomic.Int64
	sh := ratelimit.NewShared(store, ratelimit.SharedOptions{Name: "test", RetryAfter: 100 * time.Millisecond, LogEvery: time.Hour,
		Log: slog.New(slog.NewTextHandler(&logs, nil)), FellBack: func() { fellBack.Add(1) }})
	l := sh.Limiter("key", 3, time.Hour)
	now := time.Now()

	store.down.Store(true)
	allowed := 0
	for range 10 {
		if l.Allow("k", now).Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("admitted %d of 10 with the store down, want the node's own limit, 3", allowed)
	}
	if n := fellBack.Load(); n != 10 {
		t.Fatalf("counted %d fallbacks, want 10", n)
	}
	if n := store.calls.Load(); n != 1 {
		t.Fatalf("the store was asked %d times while down, want once until RetryAfter", n)
	}
	if n := strings.Count(logs.String(), "rate limits decided on this node alone"); n != 1 {
		t.Fatalf("logged %d times, want once: %s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "store down") || !strings.Contains(logs.String(), "store=test") {
		t.Fatalf("the log names neither the store nor its error: %s", logs.String())
	}

	store.down.Store(false)
	time.Sleep(150 * time.Millisecond)
	if d := l.Allow("k", now); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("after the store came back: %+v, want its own budget (2 left)", d)
	}
	if n := fellBack.Load(); n != 10 {
		t.Fatalf("counted %d fallbacks after the store came back, want still 10", n)
	}
}

// A store slower than the timeout costs a decision the timeout, not its
// slowness.
func TestSharedBoundsEachDecision(t *testing.T) {
	t.Parallel()
	sh := ratelimit.NewShared(slow{}, ratelimit.SharedOptions{Timeout: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	start := time.Now()
	d := sh.Limiter("key", 1, time.Minute).Allow("k", time.Now())
	if took := time.Since(start); took > time.Second || !d.Allowed {
		t.Fatalf("a decision on a hanging store took %v (%+v)", took, d)
	}
}

// slow is a store that answers only when its caller gives up.
type slow struct{}

func (slow) Take(ctx context.Context, _ string, _ ratelimit.Quota, _ time.Time) (ratelimit.State, error) {
	<-ctx.Done()
	return ratelimit.State{}, ctx.Err()
}

func (slow) Repeat(ctx context.Context, _ string, _ ratelimit.Quota, _ time.Time) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

// doneFails is a store that, like pgx and go-redis, fails at once on a
// context already done, and otherwise is a Memory.
type doneFails struct{ *ratelimit.Memory }

func (d doneFails) Take(ctx context.Context, key string, q ratelimit.Quota, now time.Time) (ratelimit.State, error) {
	if err := ctx.Err(); err != nil {
		return ratelimit.State{}, fmt.Errorf("query: %w", err)
	}
	return d.Memory.Take(ctx, key, q, now)
}

func (d doneFails) Repeat(ctx context.Context, key string, q ratelimit.Quota, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("query: %w", err)
	}
	return d.Memory.Repeat(ctx, key, q, now)
}

// A caller that has left (its context cancelled, a client hanging up) is
// still decided by the store: it neither marks the store down (no
// fallback counted, nothing logged) nor lets the node's own memory, which
// never saw the store's counts, admit the limit again.
func TestSharedDecidesForACallerThatLeft(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	var fellBack atomic.Int64
	sh := ratelimit.NewShared(doneFails{ratelimit.NewMemory()}, ratelimit.SharedOptions{Name: "test", RetryAfter: time.Hour,
		Log: slog.New(slog.NewTextHandler(&logs, nil)), FellBack: func() { fellBack.Add(1) }})
	q := ratelimit.Quota{Limit: 3, Window: time.Hour}
	now := time.Now()
	live := t.Context()
	left, cancel := context.WithCancel(live)
	cancel()

	allowed := 0
	for i := range 10 {
		ctx := left
		if i%2 == 0 {
			ctx = live
		}
		if sh.Take(ctx, "k", q, now).Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("admitted %d of 10 with callers leaving, want the store's limit, 3", allowed)
	}
	if !sh.Repeat(left, "k", q, now) {
		t.Fatal("a repeat by a caller that left was not moved to the retry budget")
	}
	if d := sh.Take(left, "k", q, now); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after a repeat: %+v, want the one request it gave back", d)
	}
	if n := fellBack.Load(); n != 0 {
		t.Fatalf("counted %d fallbacks for callers that left, want none", n)
	}
	if strings.Contains(logs.String(), "did not answer") {
		t.Fatalf("logged the store as not answering: %s", logs.String())
	}
}
