package ratelimit

import (
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// GCRA admits a burst of the limit at once, then one request per interval
// (window/limit), each key on its own.
func TestGCRAPerKey(t *testing.T) {
	t.Parallel()
	l := New(3, time.Minute)
	now := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	for i, want := range []int{2, 1, 0} {
		d := l.Allow("a", now)
		if !d.Allowed || d.Remaining != want || d.Limit != 3 || !d.Reset.Equal(now.Add(time.Duration(i+1)*20*time.Second)) {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	d := l.Allow("a", now.Add(time.Second))
	if d.Allowed || d.Remaining != 0 || !d.Retry.Equal(now.Add(20*time.Second)) || !d.Reset.Equal(now.Add(time.Minute)) {
		t.Fatalf("over the limit: %+v", d)
	}
	if d := l.Allow("b", now); !d.Allowed {
		t.Fatal("keys share a budget")
	}
	// One interval later, one request is back; a whole window later, all.
	if d := l.Allow("a", now.Add(20*time.Second)); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("one interval later: %+v", d)
	}
	if d := l.Allow("a", now.Add(20*time.Second)); d.Allowed {
		t.Fatalf("two requests back after one interval: %+v", d)
	}
	if d := l.Allow("a", now.Add(2*time.Minute)); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("a window later: %+v", d)
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
		// Retry, when set, is when one more request is admitted.
		{Decision{Allowed: false, Limit: 5, Remaining: 0, Reset: now.Add(time.Minute), Retry: now.Add(11500 * time.Millisecond)}, "0", "12"},
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

// Failures are counted per client address alone: wrong secrets under a key
// id, however many and from however many addresses, never refuse that id
// from an address that did not send them.
func TestFailuresPerAddress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	f := NewFailures(2, time.Minute)
	steps := []struct {
		addr, id string
		allowed  bool
		// blocked: after the failure, is the same key id from the same
		// address refused unchecked; fresh: is another key id from there;
		// jwt: is a token without a key id from there; elsewhere: is the
		// same key id from an address that sent nothing.
		blocked, fresh, jwt, elsewhere bool
	}{
		{"10.0.0.1", "tpk_a", true, false, false, false, false},
		{"10.0.0.1", "tpk_a", true, true, false, false, false},
		{"10.0.0.1", "tpk_a", false, true, false, false, false},
		// Another address, the same id: a budget of its own.
		{"10.0.0.2", "tpk_a", true, false, false, false, false},
		{"10.0.0.2", "tpk_b", true, true, false, false, false},
		// A token without an id (a JWT) counts against the address only.
		{"10.0.0.3", "", true, false, false, false, false},
		{"10.0.0.3", "", true, false, false, false, false},
		// The address is spent, but tpk_a never failed from it: checked.
		{"10.0.0.3", "", false, false, false, false, false},
	}
	for i, s := range steps {
		if d := f.Fail(s.addr, s.id, now); d.Allowed != s.allowed {
			t.Errorf("step %d: allowed %v, want %v", i, d.Allowed, s.allowed)
		}
		if _, blocked := f.Blocked(s.addr, "tpk_a", now); s.id == "tpk_a" && blocked != s.blocked {
			t.Errorf("step %d: blocked %v, want %v", i, blocked, s.blocked)
		}
		if _, blocked := f.Blocked(s.addr, "tpk_unseen", now); blocked != s.fresh {
			t.Errorf("step %d: an unseen key id blocked %v, want %v", i, blocked, s.fresh)
		}
		if _, blocked := f.Blocked(s.addr, "", now); blocked != s.jwt {
			t.Errorf("step %d: a token without a key id blocked %v, want %v", i, blocked, s.jwt)
		}
		if _, blocked := f.Blocked("192.0.2.1", s.id, now); blocked != s.elsewhere {
			t.Errorf("step %d: the key id from an address that sent nothing blocked %v, want %v", i, blocked, s.elsewhere)
		}
	}
	if _, blocked := f.Blocked("10.0.0.3", "tpk_a", now); blocked {
		t.Error("a key id that never failed from a spent address is blocked there")
	}
	if _, blocked := f.Blocked("10.0.0.1", "tpk_a", now.Add(time.Minute)); blocked {
		t.Error("a spent address stays blocked past its window")
	}
}

// A flood of wrong secrets for a real key id, from one address, with many
// more failures than the budget: the flooding address is limited, and the
// key id is not, from any other address, for its wrong secrets or its
// right one.
func TestAFloodLimitsTheFloodersAddressNotTheKeyID(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	f := NewFailures(30, time.Minute)
	for range 620 {
		f.Fail("203.0.113.9", "tpk_real", now)
	}
	if _, blocked := f.Blocked("203.0.113.9", "tpk_real", now); !blocked {
		t.Error("the flooding address is not limited")
	}
	if _, blocked := f.Blocked("198.51.100.4", "tpk_real", now); blocked {
		t.Error("the key id is refused unchecked from another address")
	}
	if d := f.Fail("198.51.100.4", "tpk_real", now); !d.Allowed {
		t.Error("another address's first failure for the flooded id is told to slow down")
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

// X-Forwarded-For is read only from a trusted proxy, from its right end:
// the rightmost address that is not a trusted proxy is the client's, and
// what a client wrote to the left of it is never read.
func TestClientAddrBehindTrustedProxies(t *testing.T) {
	t.Parallel()
	p, err := ParseProxies([]string{"10.0.0.0/8", "192.0.2.10", "fd00::/8", "::ffff:172.16.0.0/108"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, remote string
		forwarded    []string // X-Forwarded-For values, in order
		want         string
	}{
		{"a direct client's header is ignored", "198.51.100.7:1", []string{"203.0.113.1"}, "198.51.100.7"},
		{"a trusted proxy names its client", "10.1.2.3:1", []string{"203.0.113.1"}, "203.0.113.1"},
		{"a client's forged entries are left of its address", "10.1.2.3:1", []string{"1.2.3.4, 5.6.7.8, 203.0.113.1"}, "203.0.113.1"},
		{"a chain of trusted proxies", "10.1.2.3:1", []string{"203.0.113.1, 192.0.2.10", "10.9.9.9"}, "203.0.113.1"},
		{"an untrusted proxy in the chain is the client", "10.1.2.3:1", []string{"203.0.113.1, 198.51.100.99"}, "198.51.100.99"},
		{"only trusted proxies: the leftmost", "10.1.2.3:1", []string{"10.0.0.1, 192.0.2.10"}, "10.0.0.1"},
		{"no header: the proxy", "10.1.2.3:1", nil, "10.1.2.3"},
		{"junk ends the chain at the last trusted hop", "10.1.2.3:1", []string{"203.0.113.1, not-an-ip"}, "10.1.2.3"},
		{"an address with a port", "10.1.2.3:1", []string{"203.0.113.1:5555"}, "203.0.113.1"},
		{"an IPv6 client, as its /64", "[fd00::1]:1", []string{"2001:db8:1:2::99"}, "2001:db8:1:2::/64"},
		{"a mapped trusted peer", "[::ffff:10.0.0.5]:1", []string{"203.0.113.1"}, "203.0.113.1"},
		{"a trusted prefix given mapped", "172.16.0.9:1", []string{"203.0.113.1"}, "203.0.113.1"},
		{"empty entries are skipped", "10.1.2.3:1", []string{"203.0.113.1, ,"}, "203.0.113.1"},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest("GET", "http://x/", nil)
		r.RemoteAddr = tt.remote
		for _, v := range tt.forwarded {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := p.ClientAddr(r); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
	var none *Proxies
	r, _ := http.NewRequest("GET", "http://x/", nil)
	r.RemoteAddr, r.Header["X-Forwarded-For"] = "10.1.2.3:1", []string{"203.0.113.1"}
	if got := none.ClientAddr(r); got != "10.1.2.3" {
		t.Errorf("no trusted proxy: %s", got)
	}
}

func TestParseProxies(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "10.0.0.0/33", "proxy.internal", "10.0.0.1:80"} {
		if _, err := ParseProxies([]string{bad}); !errors.Is(err, ErrProxy) {
			t.Errorf("%q: %v, want ErrProxy", bad, err)
		}
	}
	if _, err := ParseProxies([]string{" 10.0.0.1 ", "::1", "10.0.0.0/8"}); err != nil {
		t.Error(err)
	}
	if _, err := ParseProxies([]string{"fe80::1%eth0"}); !errors.Is(err, ErrProxy) {
		t.Errorf("a zoned address: %v, want ErrProxy", err)
	}
	// A range written in the IPv4-mapped space trusts what it says and no
	// more: a prefix shorter than the mapped space's /96 is an IPv6 range,
	// which trusts no IPv4 peer (read otherwise, it trusted every one, and
	// every client named its own address).
	for _, tt := range []struct {
		entry, peer string
		trusted     bool
	}{
		{"::ffff:10.0.0.0/104", "10.0.0.9", true},
		{"::ffff:10.0.0.0/104", "11.0.0.9", false},
		{"::ffff:10.0.0.0/90", "203.0.113.7", false},
		{"::ffff:0:0/80", "203.0.113.7", false},
	} {
		p, err := ParseProxies([]string{tt.entry})
		if err != nil {
			t.Fatalf("%s: %v", tt.entry, err)
		}
		if got := p.trusts(netip.MustParseAddr(tt.peer)); got != tt.trusted {
			t.Errorf("%s trusts %s: %v, want %v", tt.entry, tt.peer, got, tt.trusted)
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
			if d := l.Allow("k", now); d.Remaining != max(tt.remaining-1, 0) || d.Allowed != (tt.remaining > 0) {
				t.Errorf("next request = %+v, want %d remaining before it", d, tt.remaining)
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

// Repeated moves only what was counted: with nothing left in the window's
// request count, it moves nothing, so no budget is made of thin air and a
// key is still allowed at most twice the limit in a window.
func TestRepeatedMovesOnlyWhatWasCounted(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	l := New(2, time.Minute)
	if !l.Allow("k", now).Allowed || !l.Repeated("k", now) {
		t.Fatal("the first request was not counted and moved")
	}
	if l.Repeated("k", now) {
		t.Fatal("Repeated moved a request that was not counted")
	}
	allowed := 0
	for range 5 {
		if l.Allow("k", now).Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("%d new requests allowed after the repeat, want the limit, 2", allowed)
	}
}

// A limiter of no requests allows none, a key it never saw included.
func TestAZeroLimitAllowsNothing(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	l := New(0, time.Minute)
	if d := l.Allow("k", now); d.Allowed {
		t.Fatalf("Allow = %+v, want refused", d)
	}
}
