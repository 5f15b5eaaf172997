package ratelimit

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults of SharedOptions.
const (
	// DefaultTimeout bounds one decision of a shared store: a limit is
	// worth a millisecond or two of a call, never its latency.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultRetryAfter is how long a node decides on its own limits after
	// its store failed, before it asks the store again.
	DefaultRetryAfter = time.Second
	// DefaultLogEvery is how often a node on its own limits says so.
	DefaultLogEvery = 30 * time.Second
)

// SharedOptions tune a Shared; the zero value takes the defaults.
type SharedOptions struct {
	// Name names the store in logs ("postgres", "redis").
	Name string
	// Timeout bounds each decision of the store (DefaultTimeout).
	Timeout time.Duration
	// RetryAfter is how long a store that failed is left alone, every
	// decision meanwhile taken on the node's own limit (DefaultRetryAfter).
	RetryAfter time.Duration
	// LogEvery is the least time between two logs of decisions taken on
	// the node's own limit (DefaultLogEvery).
	LogEvery time.Duration
	// Log receives those logs; nil is slog.Default().
	Log *slog.Logger
	// FellBack, when set, is told of each decision taken on the node's
	// own limit because the store did not answer (the metrics count it).
	FellBack func()
}

// Shared decides on a Store, and on the node's own memory when the store
// does not answer in time: a rate limit is never on the correctness path,
// so a store that is down or slow costs at most its timeout, and its keys
// are limited meanwhile by each node on its own (so N nodes admit up to N
// times a key's limit, as they would without a shared store), never not
// at all. Each such decision is counted (FellBack); they are logged at
// most once per LogEvery, with how many there were.
type Shared struct {
	store Store
	local *Memory
	opt   SharedOptions

	mu sync.Mutex
	// down is until when the store is left alone after it failed.
	down time.Time
	// logged is when fallbacks were last logged; missed how many were
	// taken since.
	logged time.Time
	missed int
}

// Local answers a Shared of this node's memory alone: no store, so
// nothing to fall back from.
func Local() *Shared { return &Shared{local: NewMemory()} }

// NewShared answers a Shared deciding on store, falling back to the node's
// own memory.
func NewShared(store Store, opt SharedOptions) *Shared {
	if m, ok := store.(*Memory); ok {
		// Memory answers at once and never fails: nothing to bound or
		// fall back from.
		return &Shared{local: m}
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.RetryAfter <= 0 {
		opt.RetryAfter = DefaultRetryAfter
	}
	if opt.LogEvery <= 0 {
		opt.LogEvery = DefaultLogEvery
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.Name == "" {
		opt.Name = "rate-limit store"
	}
	return &Shared{store: store, local: NewMemory(), opt: opt}
}

// Limiter answers a limiter of limit requests per window on s, its keys
// kept apart from other limiters' under scope.
func (s *Shared) Limiter(scope string, limit int, per time.Duration) *Limiter {
	if scope != "" {
		scope += ":"
	}
	return &Limiter{Limit: limit, Window: per, scope: scope, shared: s}
}

// Take decides one request of key under q at now (the node's clock).
func (s *Shared) Take(ctx context.Context, key string, q Quota, now time.Time) Decision {
	if !q.valid() {
		return Decision{Limit: max(q.Limit, 0), Reset: now}
	}
	if s.store != nil && s.up() {
		sctx, cancel := s.bound(ctx)
		st, err := s.store.Take(sctx, key, q, now)
		cancel()
		if err == nil {
			return q.decision(st, now)
		}
		s.failed(err)
	}
	st, _ := s.local.Take(ctx, key, q, now)
	return q.decision(st, now)
}

// Repeat moves one request of key under q to its retry budget (see
// Limiter.Repeated) and reports whether it did.
func (s *Shared) Repeat(ctx context.Context, key string, q Quota, now time.Time) bool {
	if !q.valid() {
		return false
	}
	if s.store != nil && s.up() {
		sctx, cancel := s.bound(ctx)
		ok, err := s.store.Repeat(sctx, key, q, now)
		cancel()
		if err == nil {
			return ok
		}
		s.failed(err)
	}
	ok, _ := s.local.Repeat(ctx, key, q, now)
	return ok
}

// up reports whether the store is to be asked, or the node is to decide
// alone for now (a fallback, counted).
func (s *Shared) up() bool {
	s.mu.Lock()
	if time.Now().Before(s.down) {
		s.fellBackLocked(nil)
		s.mu.Unlock()
		return false
	}
	s.mu.Unlock()
	return true
}

// bound answers the context of one decision of the store: ctx's values,
// never its cancellation, within the Shared timeout. A decision is one
// short statement, so a caller that leaves (a client hanging up) must not
// cut it short: a store query failing on the caller's done context would
// otherwise read as the store being down, send every node's decisions to
// its own memory for RetryAfter, and admit there what the store had
// already counted.
func (s *Shared) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.opt.Timeout)
}

// failed leaves the store alone for RetryAfter after err. The store was
// asked under bound, so err is never the caller's context ending: only the
// store failing or outlasting the Shared timeout.
func (s *Shared) failed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = time.Now().Add(s.opt.RetryAfter)
	s.fellBackLocked(err)
}

// fellBackLocked counts one decision taken on the node's own limit and
// logs, at most once per LogEvery, how many there were.
func (s *Shared) fellBackLocked(err error) {
	if s.opt.FellBack != nil {
		s.opt.FellBack()
	}
	s.missed++
	if now := time.Now(); err != nil && now.Sub(s.logged) >= s.opt.LogEvery {
		s.opt.Log.Warn("rate limits decided on this node alone: the shared store did not answer", "store", s.opt.Name,
			"decisions", s.missed, "error", err, "retry_after", s.opt.RetryAfter)
		s.logged, s.missed = now, 0
	}
}
