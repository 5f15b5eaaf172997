// Package ratelimit keeps request rates: a key's requests per window, the
// X-RateLimit-Limit, -Remaining and -Reset headers that describe them, and
// Retry-After when one is refused.
//
// The algorithm is GCRA (the generic cell rate algorithm): a quota of Limit
// requests per Window admits one request every Window/Limit (the interval),
// in bursts of up to Limit. Each key keeps one timestamp, its theoretical
// arrival time (TAT): the moment its budget is whole again. A request is
// admitted when pushing the TAT one interval later leaves it at most one
// Window ahead of now. One timestamp per key makes a decision exact (no
// window edge lets a burst of twice the limit through) and cheap enough to
// be one statement on a shared store.
//
// Where the timestamps live is a Store: Memory on one node (the embedded
// default), or a store every node shares (package postgres's RateLimits,
// package redisstore's), so the nodes of a cluster admit a key's limit
// between them, not each. A shared store decides on its own clock (now()
// in PostgreSQL, TIME in Redis) and answers durations, never instants, so
// clock skew between nodes changes nothing.
//
// A shared store is off the correctness path (Shared): each decision is
// bounded by a short timeout, and when the store is slow or unreachable the
// node decides on its own in-memory limit instead, logged and counted, and
// goes back to the store by itself once it answers again.
//
// Two budgets are kept apart: a credential's requests (Limiter, spent only
// by requests that authenticated as it) and failed authentications
// (Failures, spent by wrong keys and tokens, per client address, on each
// node). Nobody who lacks a key's secret can spend its holder's budget, and
// failures sent from one address never hold back a key presented from
// another.
package ratelimit

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Quota is a rate: up to Limit requests per Window, in bursts of up to
// Limit.
type Quota struct {
	Limit  int
	Window time.Duration
}

// Interval is the time one request's share of the quota takes to come
// back: Window/Limit.
func (q Quota) Interval() time.Duration { return q.Window / time.Duration(q.Limit) }

// valid reports whether q admits anything at all.
func (q Quota) valid() bool { return q.Limit > 0 && q.Window > 0 && q.Interval() > 0 }

// State is a store's answer to one request, measured on the store's own
// clock: whether it was admitted, and how far the key's TAT lies ahead of
// that clock after the decision (zero when its budget is whole).
type State struct {
	Allowed bool
	Ahead   time.Duration
}

// Store keeps the GCRA state of keys. Each method is one atomic decision,
// safe for concurrent use by any number of goroutines (and, for a shared
// store, nodes). A store with a clock of its own decides on it and ignores
// now; Memory decides on now. A key is text without a NUL byte (a
// PostgreSQL text value holds none). Package ratelimittest is the
// conformance suite every Store passes.
type Store interface {
	// Take decides one request of key under q: admitted, the key's TAT
	// moves one interval later; refused, nothing changes.
	Take(ctx context.Context, key string, q Quota, now time.Time) (State, error)
	// Repeat moves one request key made from its budget under q to its
	// retry budget, of the same quota, and reports whether it did: the
	// key's TAT moves one interval earlier (never before now), its retry
	// TAT one interval later. Nothing moves when the key has nothing
	// counted (its TAT is not ahead of now) or its retry budget is spent.
	Repeat(ctx context.Context, key string, q Quota, now time.Time) (bool, error)
}

// Decision is the answer for one request.
type Decision struct {
	Allowed   bool
	Limit     int
	Remaining int
	// Reset is when the key's whole budget is back.
	Reset time.Time
	// Retry, for a refused request, is when one more request would be
	// admitted (Retry-After); zero reads as Reset.
	Retry time.Time
}

// decision reads s, a store's answer under q, as a Decision at now (the
// node's clock: only durations cross between clocks).
func (q Quota) decision(s State, now time.Time) Decision {
	d := Decision{Allowed: s.Allowed, Limit: q.Limit, Reset: now.Add(max(s.Ahead, 0))}
	if s.Allowed {
		d.Remaining = min(max(int((q.Window-s.Ahead)/q.Interval()), 0), q.Limit)
	} else {
		d.Retry = now.Add(max(s.Ahead+q.Interval()-q.Window, 0))
	}
	return d
}

// Wait answers how long a refused request's caller should wait before
// trying again (at least a second, as Retry-After says it).
func (d Decision) Wait(now time.Time) time.Duration {
	at := d.Retry
	if at.IsZero() {
		at = d.Reset
	}
	return max(time.Second, at.Sub(now))
}

// The X-RateLimit headers' names as http.Header keeps them.
const (
	limitHeader     = "X-Ratelimit-Limit"
	remainingHeader = "X-Ratelimit-Remaining"
	resetHeader     = "X-Ratelimit-Reset"
)

// Header describes d in the X-RateLimit headers (and, when the request is
// refused, Retry-After), the same way on every door.
func (d Decision) Header(h http.Header, now time.Time) {
	// Every answer of every door carries these three, so they are
	// written straight into the map under their canonical names (Set
	// would canonicalise each name again, a copy of it every time), the
	// three numbers as one text and the three values in one array: two
	// allocations where there were nine. Each value's capacity is its
	// length, so that adding to one copies it rather than overwrite the
	// next.
	var buf [3 * 20]byte
	b := strconv.AppendInt(buf[:0], int64(d.Limit), 10)
	limitEnd := len(b)
	b = strconv.AppendInt(b, int64(d.Remaining), 10)
	remainingEnd := len(b)
	b = strconv.AppendInt(b, d.Reset.Unix(), 10)
	text := string(b)
	values := make([]string, 3)
	values[0], values[1], values[2] = text[:limitEnd], text[limitEnd:remainingEnd], text[remainingEnd:]
	h[limitHeader] = values[0:1:1]
	h[remainingHeader] = values[1:2:2]
	h[resetHeader] = values[2:3:3]
	if !d.Allowed {
		at := d.Retry
		if at.IsZero() {
			at = d.Reset
		}
		h.Set("Retry-After", strconv.Itoa(max(1, int(at.Sub(now).Seconds()+0.999))))
	}
}

// Limiter admits up to Limit requests per key per Window, on a Shared.
type Limiter struct {
	Limit  int
	Window time.Duration
	// scope prefixes each key in the store, so limiters sharing one never
	// spend each other's budgets.
	scope  string
	shared *Shared
}

// New answers a limiter of limit requests per window kept in this node's
// memory.
func New(limit int, per time.Duration) *Limiter {
	return Local().Limiter("", limit, per)
}

// Allow counts a request of key at now.
func (l *Limiter) Allow(key string, now time.Time) Decision {
	return l.shared.Take(context.Background(), l.scope+key, Quota{l.Limit, l.Window}, now)
}

// Repeated moves one request key made from its budget to its retry
// budget, of the same size, and reports whether it did: the request turned
// out to repeat a call already answered (see apikey.Gate.Repeated), so a
// client retrying after a crash spends its retry budget rather than the
// budget its new work needs. Once the retry budget is spent, a repeat
// costs what any request costs; so a loop of retries is still bounded, at
// twice the limit. On a shared store the retry budget is shared too.
func (l *Limiter) Repeated(key string, now time.Time) bool {
	return l.shared.Repeat(context.Background(), l.scope+key, Quota{l.Limit, l.Window}, now)
}
