package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
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
