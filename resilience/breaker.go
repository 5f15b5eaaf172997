// Package resilience keeps a node's traffic from being ruined by one part
// of it: circuit breakers stop calling a downstream that keeps failing,
// bulkheads cap how much of the node one tool, agent, organization or
// downstream may hold at once, and the load shedder refuses new work by
// priority when the node nears saturation.
//
// Every answer is immediate: a call is admitted or refused at once, never
// queued. Each node keeps its own state (no distributed semaphore, no
// shared breaker): N nodes send a failing downstream at most N probes per
// half-open window, and each node's caps protect that node.
package resilience

import (
	"sync"
	"time"
)

// State is a breaker's state.
type State int

// The breaker states.
const (
	// Closed: calls go through, and their endings are counted.
	Closed State = iota
	// Open: calls are refused at once until the cooldown has passed.
	Open
	// HalfOpen: one probe call goes through; its ending closes or reopens
	// the breaker.
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "closed"
}

// Outcome is what one handler attempt tells a breaker.
type Outcome int

// The outcomes.
const (
	// Neutral says nothing of the downstream's health: a refusal, a
	// cancellation, an ending the downstream did not decide.
	Neutral Outcome = iota
	// Success: the downstream answered, whether with data or with a
	// business failure (not found, conflict, invalid input).
	Success
	// Failure: the downstream could not be reached, failed with a
	// retryable error (a 5xx), or did not answer in time.
	Failure
)

// BreakerConfig sets a breaker's thresholds; zero fields take the
// defaults.
type BreakerConfig struct {
	// Window is the trailing window the error rate is measured over
	// (default 30s).
	Window time.Duration
	// Threshold is the error rate at which the breaker opens (default
	// 0.5).
	Threshold float64
	// MinSamples is the fewest endings in the window before the rate is
	// trusted (default 20): a tool called twice a minute must not open on
	// one failure.
	MinSamples int
	// Cooldown is how long a breaker stays open before its probe (default
	// 30s); each failed probe doubles it, up to MaxCooldown (default 5m).
	Cooldown    time.Duration
	MaxCooldown time.Duration
}

// The breaker defaults.
const (
	DefaultWindow      = 30 * time.Second
	DefaultThreshold   = 0.5
	DefaultMinSamples  = 20
	DefaultCooldown    = 30 * time.Second
	DefaultMaxCooldown = 5 * time.Minute
)

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Threshold <= 0 || c.Threshold > 1 {
		c.Threshold = DefaultThreshold
	}
	if c.MinSamples <= 0 {
		c.MinSamples = DefaultMinSamples
	}
	if c.Cooldown <= 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.MaxCooldown < c.Cooldown {
		c.MaxCooldown = max(DefaultMaxCooldown, c.Cooldown)
	}
	return c
}

// buckets is how many slices the trailing window is cut into.
const buckets = 30

type bucket struct {
	slot              int64 // which slice of time the counts are of
	success, failures int
}

// Breaker is the circuit breaker of one (tool, target) pair on this node.
// It is safe for concurrent use.
type Breaker struct {
	cfg BreakerConfig
	now func() time.Time

	mu       sync.Mutex
	state    State
	window   [buckets]bucket
	cooldown time.Duration
	openedAt time.Time
	// probing is set while the half-open probe is in flight.
	probing bool
	// trips counts how often the breaker opened.
	trips int64
}

// NewBreaker answers a closed breaker reading the clock now (nil:
// time.Now).
func NewBreaker(cfg BreakerConfig, now func() time.Time) *Breaker {
	if now == nil {
		now = time.Now
	}
	cfg = cfg.withDefaults()
	return &Breaker{cfg: cfg, now: now, cooldown: cfg.Cooldown}
}

// Allow asks whether a call may go through. ok is false when the breaker
// is open, or half-open with its probe in flight; wait is then how long
// until a probe may go. probe is true when the call is the half-open
// probe: its ending, recorded with Record(o, true), decides the breaker,
// and a probe that ends without reaching the downstream must be recorded
// Neutral so that another call may probe.
func (b *Breaker) Allow() (ok, probe bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return true, false, 0
	case Open:
		next := b.openedAt.Add(b.cooldown)
		if w := next.Sub(b.now()); w > 0 {
			return false, false, w
		}
		b.state, b.probing = HalfOpen, true
		return true, true, 0
	}
	if b.probing {
		// The probe's own time bounds the wait; a second is a fair guess.
		return false, false, time.Second
	}
	b.probing = true
	return true, true, 0
}

// Closed reports whether the breaker is closed, letting every call
// through; when it is not, wait is how long until it lets a probe through
// (at least a second: a half-open breaker's probe is in flight, or due).
func (b *Breaker) Closed() (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return true, 0
	case Open:
		wait = b.openedAt.Add(b.cooldown).Sub(b.now())
	}
	return false, max(wait, time.Second)
}

// Record counts one attempt's ending. probe says the attempt is the
// half-open probe Allow let through: only its ending moves a half-open
// breaker; an attempt admitted before the breaker opened is only counted.
func (b *Breaker) Record(o Outcome, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if o != Neutral {
		bk := b.bucketAt(now)
		if o == Failure {
			bk.failures++
		} else {
			bk.success++
		}
	}
	if probe && b.state == HalfOpen {
		b.probing = false
		switch o {
		case Success:
			b.state, b.cooldown = Closed, b.cfg.Cooldown
			b.window = [buckets]bucket{} // the failures before are history
		case Failure:
			b.state, b.openedAt = Open, now
			b.cooldown = min(2*b.cooldown, b.cfg.MaxCooldown)
			b.trips++
		}
		return
	}
	if o == Failure && b.state == Closed {
		failures, samples := b.counts(now)
		if samples >= b.cfg.MinSamples && float64(failures) >= b.cfg.Threshold*float64(samples) {
			b.state, b.openedAt, b.cooldown = Open, now, b.cfg.Cooldown
			b.trips++
		}
	}
}

// slice is the width of one bucket.
func (b *Breaker) slice() time.Duration { return b.cfg.Window / buckets }

func (b *Breaker) bucketAt(now time.Time) *bucket {
	slot := now.UnixNano() / int64(b.slice())
	bk := &b.window[slot%buckets]
	if bk.slot != slot {
		*bk = bucket{slot: slot}
	}
	return bk
}

// counts answers the failures and endings in the trailing window.
func (b *Breaker) counts(now time.Time) (failures, samples int) {
	slot := now.UnixNano() / int64(b.slice())
	for i := range b.window {
		bk := &b.window[i]
		if bk.slot > slot-buckets && bk.slot <= slot {
			failures += bk.failures
			samples += bk.failures + bk.success
		}
	}
	return failures, samples
}

// BreakerStatus is what a breaker shows an operator.
type BreakerStatus struct {
	State State
	// Failures and Samples are the failed and all endings in the trailing
	// window.
	Failures, Samples int
	// OpenedAt is when the breaker last opened (zero if never).
	OpenedAt time.Time
	// NextProbe is when an open breaker lets its probe through (zero
	// unless open).
	NextProbe time.Time
	// Trips counts how often it opened.
	Trips int64
}

// Status answers the breaker's state now.
func (b *Breaker) Status() BreakerStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, s := b.counts(b.now())
	st := BreakerStatus{State: b.state, Failures: f, Samples: s, OpenedAt: b.openedAt, Trips: b.trips}
	if b.state == Open {
		st.NextProbe = b.openedAt.Add(b.cooldown)
	}
	return st
}
