// Package ratelimit keeps per-caller request limits on one node: a fixed
// window per key, which is what the X-RateLimit-Limit, -Remaining and
// -Reset headers describe. Limits are local by design: a node never waits
// on another to admit a request, so N nodes admit up to N times a key's
// limit.
//
// Two budgets are kept apart: a credential's requests (Limiter, spent only
// by requests that authenticated as it) and failed authentications
// (Failures, spent by wrong keys and tokens, per client address and per key
// id). Nobody who lacks a key's secret can spend its holder's budget.
package ratelimit

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Limiter admits up to Limit requests per key per Window.
type Limiter struct {
	Limit  int
	Window time.Duration
	mu     sync.Mutex
	counts map[string]*window
	swept  time.Time
}

type window struct {
	start time.Time
	n     int
	// repeats counts the requests of the window moved to its retry
	// budget (see Repeated).
	repeats int
}

// Decision is the answer for one request.
type Decision struct {
	Allowed   bool
	Limit     int
	Remaining int
	// Reset is when the current window ends.
	Reset time.Time
}

// New answers a limiter of limit requests per window.
func New(limit int, per time.Duration) *Limiter {
	return &Limiter{Limit: limit, Window: per, counts: map[string]*window{}}
}

// Allow counts a request of key at now.
func (l *Limiter) Allow(key string, now time.Time) Decision {
	return l.take(key, now, true)
}

// Peek answers what Allow would answer for key at now without counting a
// request: Allowed reports whether the budget has room for one more.
func (l *Limiter) Peek(key string, now time.Time) Decision {
	return l.take(key, now, false)
}

// Repeated moves one request key made in the window of now from its budget
// to its retry budget, of the same size, and reports whether it did: the
// request turned out to repeat a call already answered (see
// apikey.Gate.Repeated), so a client retrying after a crash spends its
// retry budget rather than the budget its new work needs. Once the retry
// budget is spent, a repeat costs what any request costs; so a loop of
// retries is still bounded, at twice the limit.
func (l *Limiter) Repeated(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.counts[key]
	if !ok || now.Sub(w.start) >= l.Window || w.n == 0 || w.repeats >= l.Limit {
		// A window that ended took its count with it: nothing to move.
		return false
	}
	w.n--
	w.repeats++
	return true
}

func (l *Limiter) take(key string, now time.Time, count bool) Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > l.Window { // forget windows that ended
		for k, w := range l.counts {
			if now.Sub(w.start) >= l.Window {
				delete(l.counts, k)
			}
		}
		l.swept = now
	}
	w, ok := l.counts[key]
	if !count && (!ok || now.Sub(w.start) >= l.Window) {
		// An unseen key has its whole budget; nothing is stored for it.
		start := now.Truncate(l.Window)
		if now.Sub(start) >= l.Window {
			start = now
		}
		return Decision{Allowed: l.Limit > 0, Limit: l.Limit, Remaining: l.Limit, Reset: start.Add(l.Window)}
	}
	if !ok || now.Sub(w.start) >= l.Window {
		w = &window{start: now.Truncate(l.Window)}
		if now.Sub(w.start) >= l.Window {
			w.start = now
		}
		l.counts[key] = w
	}
	d := Decision{Limit: l.Limit, Reset: w.start.Add(l.Window)}
	if w.n >= l.Limit {
		return d
	}
	if !count {
		d.Allowed, d.Remaining = true, l.Limit-w.n
		return d
	}
	w.n++
	d.Allowed, d.Remaining = true, l.Limit-w.n
	return d
}

// Failures limits failed authentications, on a budget of their own: per
// client address and per key id, each up to the limit per window. It never
// counts a request that authenticated, so failures only ever refuse
// further failures' checks, never a credential that proves itself.
//
// What each budget does once spent:
//
//   - A key id over its budget answers its further failures with a refusal
//     to retry later rather than a plain "not valid"; a right secret for
//     that id still authenticates.
//   - An API key presented from an address over its budget, under a key id
//     over its budget too, is refused before its secret is checked (see
//     Blocked). That is what caps the Argon2id work a flood costs: each
//     key id pays at most its budget of verifications per window, whatever
//     the number of addresses or tokens. Every other token is checked,
//     because refusing it unchecked would let anyone sharing the address
//     (a NAT, a proxy) lock out its holders: a JWT (cheap to verify), a
//     malformed key (refused without the store), an API key whose id is
//     not being flooded (one store read, and at most one Argon2id run
//     until its id's budget is spent).
type Failures struct {
	byAddr, byID *Limiter
}

// NewFailures answers a failure budget of limit failed authentications per
// window, for each client address and for each key id.
func NewFailures(limit int, per time.Duration) *Failures {
	return &Failures{byAddr: New(limit, per), byID: New(limit, per)}
}

// Blocked reports whether an API key with key id id, presented from the
// client address addr, is to be refused at now without being checked: both
// the address and the id have spent their failure budgets. A token without
// a key id (id "": a JWT, a malformed key) is never blocked, since checking
// it costs no Argon2id run. The decision says when the caller may try again.
func (f *Failures) Blocked(addr, id string, now time.Time) (Decision, bool) {
	if id == "" {
		return Decision{}, false
	}
	da := f.byAddr.Peek(addr, now)
	if da.Allowed {
		return da, false
	}
	di := f.byID.Peek(id, now)
	if di.Allowed {
		return di, false
	}
	if di.Reset.After(da.Reset) {
		return di, true
	}
	return da, true
}

// Fail counts one failed authentication from addr, presenting the key id
// id ("" when the token names none, as a JWT or a malformed key), and
// answers whether the failure is still within both budgets: when Allowed
// is false the caller is told to slow down rather than that its
// credential is not valid.
func (f *Failures) Fail(addr, id string, now time.Time) Decision {
	da := f.byAddr.Allow(addr, now)
	if id == "" {
		return da
	}
	di := f.byID.Allow(id, now)
	switch {
	case !da.Allowed:
		return da
	case !di.Allowed, di.Remaining < da.Remaining:
		return di
	}
	return da
}

// ClientAddr answers the address a request's failure budget is kept under:
// the peer address of its connection (RemoteAddr), never a header a client
// can write (X-Forwarded-For, Forwarded), which would let a flooder pick a
// fresh address per request. An IPv6 address counts as its /64, the block
// one subscriber is usually given. Behind a reverse proxy every client
// shares the proxy's address, and so one failure budget; only failures are
// pooled there: a correct credential is still checked and admitted, unless
// it is an API key that is not cached and whose own key id has spent its
// failure budget too (see Failures.Blocked).
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.String()
		}
	}
	return a.String()
}

// Header describes d in the X-RateLimit headers (and, when the request is
// refused, Retry-After), the same way on every door.
func (d Decision) Header(h http.Header, now time.Time) {
	h.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(d.Reset.Unix(), 10))
	if !d.Allowed {
		h.Set("Retry-After", strconv.Itoa(max(1, int(d.Reset.Sub(now).Seconds()+0.999))))
	}
}
