package ratelimit

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestFixedWindowPerKey(t *testing.T) {
	t.Parallel()
	l := New(3, time.Minute)
	now := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	for i, want := range []int{2, 1, 0} {
		d := l.Allow("a", now)
		if !d.Allowed || d.Remaining != want || d.Limit != 3 || !d.Reset.Equal(time.Date(2026, 11, 29, 12, 1, 0, 0, time.UTC)) {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	if d := l.Allow("a", now.Add(time.Second)); d.Allowed || d.Remaining != 0 {
		t.Fatalf("over the limit: %+v", d)
	}
	if d := l.Allow("b", now); !d.Allowed {
		t.Fatal("keys share a window")
	}
	if d := l.Allow("a", now.Add(50*time.Second)); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("next window: %+v", d)
	}
}

func TestDecisionHeader(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000, 0)
	tests := []struct {
		d         Decision
		remaining string
		retry     string
	}{
		{Decision{Allowed: true, Limit: 5, Remaining: 4, Reset: now.Add(30 * time.Second)}, "4", ""},
		{Decision{Allowed: false, Limit: 5, Remaining: 0, Reset: now.Add(2500 * time.Millisecond)}, "0", "3"},
		{Decision{Allowed: false, Limit: 5, Remaining: 0, Reset: now}, "0", "1"},
	}
	for _, tt := range tests {
		h := http.Header{}
		tt.d.Header(h, now)
		if h.Get("X-RateLimit-Limit") != "5" || h.Get("X-RateLimit-Remaining") != tt.remaining ||
			h.Get("X-RateLimit-Reset") != strconv.FormatInt(tt.d.Reset.Unix(), 10) || h.Get("Retry-After") != tt.retry {
			t.Errorf("%+v: headers %v", tt.d, h)
		}
	}
}

func TestPeekCountsNothing(t *testing.T) {
	t.Parallel()
	l := New(2, time.Minute)
	now := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	for range 5 {
		if d := l.Peek("a", now); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("peek of an unseen key: %+v", d)
		}
	}
	l.Allow("a", now)
	l.Allow("a", now)
	if d := l.Peek("a", now); d.Allowed || d.Remaining != 0 {
		t.Fatalf("peek of a spent key: %+v", d)
	}
}

// Failures are counted per address and per key id; Blocked refuses an
// unchecked key only when both its address and its key id are spent, and
// never a token without a key id.
func TestFailuresPerAddressAndKeyID(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	f := NewFailures(2, time.Minute)
	steps := []struct {
		addr, id string
		allowed  bool
		// blocked: after the failure, is the same key id from the same
		// address refused unchecked; fresh: is another key id from there;
		// jwt: is a token without a key id from there.
		blocked, fresh, jwt bool
	}{
		{"10.0.0.1", "tpk_a", true, false, false, false},
		{"10.0.0.1", "tpk_a", true, true, false, false},
		// Another address, the same id: the id's budget is spent.
		{"10.0.0.2", "tpk_a", false, false, false, false},
		// Another id from that address: the address is spent, but tpk_b
		// is not, so neither it nor an unseen id is blocked.
		{"10.0.0.2", "tpk_b", true, false, false, false},
		// A token without an id (a JWT) counts against the address only.
		{"10.0.0.3", "", true, false, false, false},
		{"10.0.0.3", "", true, false, false, false},
		// tpk_a from this spent address is blocked; a JWT never is.
		{"10.0.0.3", "tpk_a", false, true, false, false},
	}
	for i, s := range steps {
		if d := f.Fail(s.addr, s.id, now); d.Allowed != s.allowed {
			t.Errorf("step %d: allowed %v, want %v", i, d.Allowed, s.allowed)
		}
		if _, blocked := f.Blocked(s.addr, s.id, now); blocked != s.blocked {
			t.Errorf("step %d: blocked %v, want %v", i, blocked, s.blocked)
		}
		if _, blocked := f.Blocked(s.addr, "tpk_unseen", now); blocked != s.fresh {
			t.Errorf("step %d: an unseen key id blocked %v, want %v", i, blocked, s.fresh)
		}
		if _, blocked := f.Blocked(s.addr, "", now); blocked != s.jwt {
			t.Errorf("step %d: a token without a key id blocked %v, want %v", i, blocked, s.jwt)
		}
	}
	if _, blocked := f.Blocked("10.0.0.1", "tpk_a", now.Add(time.Minute)); blocked {
		t.Error("a spent address stays blocked past its window")
	}
}

func TestClientAddrIsTheConnections(t *testing.T) {
	t.Parallel()
	tests := []struct{ remote, forwarded, want string }{
		{"192.0.2.7:5123", "", "192.0.2.7"},
		{"192.0.2.7:5123", "198.51.100.1", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:1", "", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "", "2001:db8:1:2::/64"},
		{"not an address", "", "not an address"},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest("GET", "http://x/", nil)
		r.RemoteAddr = tt.remote
		if tt.forwarded != "" {
			r.Header.Set("X-Forwarded-For", tt.forwarded)
			r.Header.Set("Forwarded", "for="+tt.forwarded)
		}
		if got := ClientAddr(r); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.remote, got, tt.want)
		}
	}
}

func TestRepeatedMovesARequestToTheRetryBudget(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	tests := []struct {
		name string
		// repeats is how many requests, each a repeat, are tried; moved
		// how many Repeated moves; remaining the request budget left.
		limit, repeats, moved, remaining int
	}{
		{"some repeats", 3, 2, 2, 3},
		{"every request a repeat", 3, 3, 3, 3},
		// Two move; then repeats spend the request budget until it is out.
		{"more repeats than the retry budget", 2, 5, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := New(tt.limit, time.Minute)
			moved := 0
			for range tt.repeats {
				if d := l.Allow("k", now); !d.Allowed {
					break
				}
				if l.Repeated("k", now) {
					moved++
				}
			}
			if moved != tt.moved {
				t.Fatalf("moved %d repeats to the retry budget, want %d", moved, tt.moved)
			}
			// The moved ones left the request budget whole for new work.
			if d := l.Peek("k", now); d.Remaining != tt.remaining {
				t.Errorf("remaining = %d, want %d", d.Remaining, tt.remaining)
			}
		})
	}
	// Nothing moves for a key with no request in the window, or after it.
	l := New(2, time.Minute)
	if l.Repeated("k", now) {
		t.Error("Repeated moved a request never made")
	}
	l.Allow("k", now)
	if l.Repeated("k", now.Add(time.Minute)) {
		t.Error("Repeated moved a request of a window that ended")
	}
}
