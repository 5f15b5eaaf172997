// Package ratelimit keeps per-caller request limits on one node: a fixed
// window per key, which is what the X-RateLimit-Limit, -Remaining and
// -Reset headers describe. Limits are local by design: a node never waits
// on another to admit a request, so N nodes admit up to N times a key's
// limit.
package ratelimit

import (
	"net/http"
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
	w.n++
	d.Allowed, d.Remaining = true, l.Limit-w.n
	return d
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
