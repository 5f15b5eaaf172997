// Package ratelimittest is the conformance suite of ratelimit.Store: the
// in-memory store, PostgreSQL's and Redis's run it, which is what makes
// them interchangeable. It runs on the real clock (a shared store decides
// on its own), with quotas whose intervals dwarf a test's scheduling
// noise, and a fresh key prefix per test.
package ratelimittest

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/ratelimit"
)

// slack is how far a store's answer may stray from the arithmetic: the
// time between the test's clock and the store's, and a statement's run.
const slack = 2 * time.Second

// Run runs the suite against the store open answers; open may answer the
// same store every time, since each test keeps to keys of its own.
func Run(t *testing.T, open func(t *testing.T) ratelimit.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s ratelimit.Store, key func(string) string)
	}{
		{"BurstThenRefused", burstThenRefused},
		{"KeysApart", keysApart},
		{"Refill", refill},
		{"RepeatMovesToTheRetryBudget", repeatMoves},
		{"RepeatMovesOnlyWhatWasCounted", repeatOnlyCounted},
		{"ConcurrentTakesAdmitTheLimit", concurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			prefix := newPrefix()
			tt.run(t, s, func(k string) string { return prefix + k })
		})
	}
}

func newPrefix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "rltest:" + hex.EncodeToString(b) + ":"
}

// near reports whether got is want within slack.
func near(got, want time.Duration) bool { return got >= want-slack && got <= want+slack }

// hour is a quota of limit requests an hour: nothing comes back during a
// test.
func hour(limit int) ratelimit.Quota { return ratelimit.Quota{Limit: limit, Window: time.Hour} }

func take(t *testing.T, s ratelimit.Store, key string, q ratelimit.Quota) ratelimit.State {
	t.Helper()
	st, err := s.Take(t.Context(), key, q, time.Now())
	if err != nil {
		t.Fatalf("Take(%s): %v", key, err)
	}
	return st
}

func repeat(t *testing.T, s ratelimit.Store, key string, q ratelimit.Quota) bool {
	t.Helper()
	ok, err := s.Repeat(t.Context(), key, q, time.Now())
	if err != nil {
		t.Fatalf("Repeat(%s): %v", key, err)
	}
	return ok
}

// A key is admitted its limit at once, each request pushing its TAT one
// interval ahead; the next is refused and changes nothing.
func burstThenRefused(t *testing.T, s ratelimit.Store, key func(string) string) {
	q := hour(3)
	for i := 1; i <= 3; i++ {
		st := take(t, s, key("a"), q)
		if !st.Allowed || !near(st.Ahead, time.Duration(i)*20*time.Minute) {
			t.Fatalf("request %d: %+v, want admitted %v ahead", i, st, time.Duration(i)*20*time.Minute)
		}
	}
	for range 2 {
		if st := take(t, s, key("a"), q); st.Allowed || !near(st.Ahead, time.Hour) {
			t.Fatalf("over the limit: %+v, want refused an hour ahead", st)
		}
	}
}

// One key's requests never spend another's budget.
func keysApart(t *testing.T, s ratelimit.Store, key func(string) string) {
	q := hour(1)
	if !take(t, s, key("a"), q).Allowed || take(t, s, key("a"), q).Allowed {
		t.Fatal("a: want one admitted, then refused")
	}
	if st := take(t, s, key("b"), q); !st.Allowed {
		t.Fatalf("b refused after a spent its budget: %+v", st)
	}
}

// A refused key is admitted again once an interval has passed.
func refill(t *testing.T, s ratelimit.Store, key func(string) string) {
	q := ratelimit.Quota{Limit: 2, Window: 600 * time.Millisecond}
	take(t, s, key("a"), q)
	take(t, s, key("a"), q)
	if st := take(t, s, key("a"), q); st.Allowed {
		t.Fatalf("third request in the burst admitted: %+v", st)
	}
	time.Sleep(q.Interval() + 50*time.Millisecond)
	if st := take(t, s, key("a"), q); !st.Allowed {
		t.Fatalf("refused an interval later: %+v", st)
	}
}

// Repeat gives a request back to the key's budget, up to a retry budget
// of the same size; past it, a repeat costs what any request costs.
func repeatMoves(t *testing.T, s ratelimit.Store, key func(string) string) {
	q := hour(2)
	moved := 0
	for range 5 {
		if !take(t, s, key("a"), q).Allowed {
			break
		}
		if repeat(t, s, key("a"), q) {
			moved++
		}
	}
	if moved != 2 {
		t.Fatalf("moved %d repeats to the retry budget, want 2", moved)
	}
	if st := take(t, s, key("a"), q); st.Allowed {
		t.Fatalf("admitted past both budgets: %+v", st)
	}
	if repeat(t, s, key("never"), q) {
		t.Fatal("Repeat moved a request of a key never seen")
	}
}

// Repeat moves only what was counted: no budget is made of thin air.
func repeatOnlyCounted(t *testing.T, s ratelimit.Store, key func(string) string) {
	q := hour(2)
	if !take(t, s, key("a"), q).Allowed || !repeat(t, s, key("a"), q) {
		t.Fatal("the first request was not counted and moved")
	}
	if repeat(t, s, key("a"), q) {
		t.Fatal("Repeat moved a request that was not counted")
	}
	allowed := 0
	for range 4 {
		if take(t, s, key("a"), q).Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("%d requests admitted after the repeat, want the limit, 2", allowed)
	}
}

// Concurrent requests of one key are admitted exactly its limit: each
// decision is atomic.
func concurrent(t *testing.T, s ratelimit.Store, key func(string) string) {
	q := hour(20)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				st, err := s.Take(t.Context(), key("a"), q, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				if st.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 20 {
		t.Fatalf("admitted %d of 80 concurrent requests, want the limit, 20", n)
	}
}
