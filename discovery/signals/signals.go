// Package signals answers what a node knows of how each organization's
// tools fare, for the search's ranking (discovery.Signals): their health,
// from the node's circuit breakers and the recent calls' failures, and
// optionally how much each organization uses them.
//
// Everything is kept in memory, per node, from what the node sees already:
// the breakers of package resilience and the calls the invoker tells its
// observers of. Nothing is read from the store, so a search pays for no
// query; a node that just started knows nothing, and ranks by relevance
// alone until calls come.
package signals

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/resilience"
)

var (
	_ discovery.Signals = (*Keeper)(nil)
	_ invoke.Observer   = (*Keeper)(nil)
)

// The defaults of a Config.
const (
	// DefaultWindow is how far back calls count.
	DefaultWindow = time.Hour
	// DefaultMinCalls is how many calls in the window an error rate needs
	// before it says anything: one failure of two calls is not a sick
	// tool.
	DefaultMinCalls = 5
	// DefaultMaxTools bounds the (organization, tool) pairs whose calls
	// are counted; past it a pair not yet counted is not, until the
	// window forgets others.
	DefaultMaxTools = 1 << 16
	// DefaultMaxToolsPerOrganization bounds one organization's share of
	// them: an organization calling thousands of tools of its own never
	// leaves another's uncounted.
	DefaultMaxToolsPerOrganization = 1 << 12
	// DefaultStale is how long one snapshot of the breakers and counts
	// answers before it is taken again.
	DefaultStale = time.Second
)

// buckets is how many slices the window is counted in.
const buckets = 12

// Config configures a Keeper. Every field is optional.
type Config struct {
	// Traffic is the node's breakers; nil when traffic protection is off.
	Traffic *resilience.Traffic
	// Popularity turns on the popularity signal: without it Popularity
	// answers 0 for every tool.
	Popularity bool
	// Window is how far back calls count (default DefaultWindow).
	Window time.Duration
	// MinCalls is DefaultMinCalls when zero.
	MinCalls int
	// MaxTools is DefaultMaxTools when zero, MaxToolsPerOrganization
	// DefaultMaxToolsPerOrganization.
	MaxTools, MaxToolsPerOrganization int
	// Stale is DefaultStale when zero.
	Stale time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// key is one organization's tool.
type key struct{ org, tool string }

// counts are one tool's calls, and the failures among them, by slice of
// the window.
type counts struct {
	calls, failures [buckets]int64
	// slice is the slice (time since the epoch over the slice's length)
	// each bucket counts, so a bucket of an earlier lap is read as empty.
	slice [buckets]int64
}

// Keeper keeps the signals. It is an invoke.Observer (the calls) and a
// discovery.Signals (what it answers).
type Keeper struct {
	cfg   Config
	slice time.Duration

	mu     sync.Mutex
	counts map[key]*counts
	// perOrg is how many of counts are each organization's.
	perOrg map[string]int

	// snap is the latest snapshot, taken again once Stale has passed;
	// snapMu lets one search take it while the others read the last.
	snapMu sync.Mutex
	snap   atomic.Pointer[snapshot]
	// running says Run keeps snap current.
	running atomic.Bool
	// waiting says Run waits for a call, its last snapshot empty: the
	// next call observed tells it on observed.
	waiting  atomic.Bool
	observed chan struct{}
}

// snapshot is what Health and Popularity read: computed at most once per
// Stale, so a search over thousands of candidates reads maps, and never
// walks every breaker per candidate.
type snapshot struct {
	at time.Time
	// of is by organization, then tool: an organization nothing is known
	// of costs a search one lookup, not one per candidate.
	of map[string]map[string]entry
}

// get answers what s knows of org's tool.
func (s *snapshot) get(org, name string) entry {
	if m := s.of[org]; m != nil {
		return m[name]
	}
	return entry{}
}

// set records what s knows of a tool.
func (s *snapshot) set(k key, e entry) {
	m := s.of[k.org]
	if m == nil {
		m = map[string]entry{}
		s.of[k.org] = m
	}
	m[k.tool] = e
}

// entry is what a snapshot knows of one tool.
type entry struct {
	health float64
	known  bool // health says something
	// used is the tool's share of its organization's most called tool
	// (on a log scale).
	used float64
}

// New answers a Keeper.
func New(cfg Config) *Keeper {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MinCalls <= 0 {
		cfg.MinCalls = DefaultMinCalls
	}
	if cfg.MaxTools <= 0 {
		cfg.MaxTools = DefaultMaxTools
	}
	if cfg.MaxToolsPerOrganization <= 0 {
		cfg.MaxToolsPerOrganization = DefaultMaxToolsPerOrganization
	}
	if cfg.Stale <= 0 {
		cfg.Stale = DefaultStale
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Keeper{cfg: cfg, slice: cfg.Window / buckets, counts: map[key]*counts{}, perOrg: map[string]int{}, observed: make(chan struct{}, 1)}
}

// failed reports whether a call's outcome is the tool's failure (its
// downstream failed, timed out or answered what it may not), not the
// caller's (a refusal, a bad input, an approval asked for) nor a replay.
func failed(outcome string) bool {
	switch toolplane.Code(outcome) {
	case toolplane.CodeToolUnavailable, toolplane.CodeInvalidOutput, toolplane.CodeUnavailable,
		toolplane.CodeRetryableUpstream, toolplane.CodeTimeout, toolplane.CodeUncertain, toolplane.CodeInternalError:
		return true
	}
	return outcome == "fault"
}

// counted reports whether a call's outcome says anything of the tool: a
// call that ran, well or not.
func counted(outcome string) bool { return outcome == "ok" || failed(outcome) }

// ObserveCall counts a call that ran, and whether it failed.
func (k *Keeper) ObserveCall(o *invoke.Observation) {
	if k.waiting.Load() {
		// Run waits for a call (see Run); any call, counted or not,
		// may have moved a breaker.
		select {
		case k.observed <- struct{}{}:
		default: // told already
		}
	}
	if o == nil || !counted(o.Outcome) || o.CallerCut {
		// A call its caller's own deadline cut says nothing of the tool.
		return
	}
	n := k.cfg.Now().UnixNano() / int64(k.slice)
	b := int(n % buckets)
	kk := key{o.Organization, o.Tool}
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.counts[kk]
	if c == nil {
		if k.full(kk.org) {
			k.forget(n)
			if k.full(kk.org) {
				return
			}
		}
		c = &counts{}
		k.counts[kk] = c
		k.perOrg[kk.org]++
	}
	if c.slice[b] != n {
		c.slice[b], c.calls[b], c.failures[b] = n, 0, 0
	}
	c.calls[b]++
	if failed(o.Outcome) {
		c.failures[b]++
	}
}

// full reports whether a tool of org not counted yet may not be: the
// bound of all, or org's own, is reached. k.mu is held.
func (k *Keeper) full(org string) bool {
	return len(k.counts) >= k.cfg.MaxTools || k.perOrg[org] >= k.cfg.MaxToolsPerOrganization
}

// forget drops the tools with no call in the window ending at slice now.
// k.mu is held.
func (k *Keeper) forget(now int64) {
	for kk, c := range k.counts {
		if calls, _ := c.sum(now); calls == 0 {
			delete(k.counts, kk)
			if k.perOrg[kk.org]--; k.perOrg[kk.org] <= 0 {
				delete(k.perOrg, kk.org)
			}
		}
	}
}

// sum answers the calls and failures of the window ending at slice now.
func (c *counts) sum(now int64) (calls, failures int64) {
	for i := range buckets {
		if c.slice[i] > now-buckets && c.slice[i] <= now {
			calls += c.calls[i]
			failures += c.failures[i]
		}
	}
	return calls, failures
}

// Health answers how org's tool fares, from 1 to 0: 0 while a breaker of
// it is open, at most 0.5 while one lets probes through, and otherwise the
// share of its recent calls that did not fail (the worse of this node's
// count and the breakers' own windows), once there are enough of them.
// ok is false when nothing is known.
func (k *Keeper) Health(org, name string) (float64, bool) {
	e := k.current().get(org, name)
	return e.health, e.known
}

// Popularity answers how much org calls the tool, from 0 to 1: its calls
// in the window over those of org's most called tool, on a log scale. It
// is 0 unless Config.Popularity is set.
func (k *Keeper) Popularity(org, name string) float64 {
	if !k.cfg.Popularity {
		return 0
	}
	return k.current().get(org, name).used
}

// Run takes the snapshot again every Stale until ctx ends, so a search
// reads it without looking at the clock for each candidate. Without Run a
// snapshot is taken again by the first read after it went stale.
//
// A snapshot that knows nothing (no call in the window, no breaker that
// says anything) stays so until a call is observed: every count and every
// breaker's state comes from calls, and an open breaker is something
// known. Run then waits for the next call before it counts Stale again,
// so an idle node does not wake every Stale, and a busy one takes at most
// one snapshot per Stale as before.
func (k *Keeper) Run(ctx context.Context) {
	t := time.NewTimer(k.cfg.Stale)
	defer t.Stop()
	k.snap.Store(k.take(k.cfg.Now()))
	k.running.Store(true)
	defer k.running.Store(false)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Waiting from before the snapshot is taken: a call observed
		// after it is told.
		k.waiting.Store(true)
		s := k.take(k.cfg.Now())
		k.snap.Store(s)
		if len(s.of) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-k.observed:
			}
		}
		k.waiting.Store(false)
		t.Reset(k.cfg.Stale)
	}
}

// current answers the snapshot, taking it again when stale.
func (k *Keeper) current() *snapshot {
	if k.running.Load() {
		return k.snap.Load()
	}
	now := k.cfg.Now()
	fresh := func(s *snapshot) bool { return s != nil && now.Sub(s.at) < k.cfg.Stale && !now.Before(s.at) }
	if s := k.snap.Load(); fresh(s) {
		return s
	}
	k.snapMu.Lock()
	defer k.snapMu.Unlock()
	if s := k.snap.Load(); fresh(s) {
		return s
	}
	s := k.take(now)
	k.snap.Store(s)
	return s
}

// take computes a snapshot as of now.
func (k *Keeper) take(now time.Time) *snapshot {
	s := &snapshot{at: now, of: map[string]map[string]entry{}}
	n := now.UnixNano() / int64(k.slice)
	most := map[string]int64{}
	calls := map[key]int64{}
	k.mu.Lock()
	for kk, c := range k.counts {
		all, bad := c.sum(n)
		if all == 0 {
			continue
		}
		calls[kk] = all
		most[kk.org] = max(most[kk.org], all)
		if all >= int64(k.cfg.MinCalls) {
			s.set(kk, entry{health: 1 - float64(bad)/float64(all), known: true})
		}
	}
	k.mu.Unlock()
	if k.cfg.Popularity {
		for kk, all := range calls {
			e := s.get(kk.org, kk.tool)
			e.used = math.Log1p(float64(all)) / math.Log1p(float64(most[kk.org]))
			s.set(kk, e)
		}
	}
	if k.cfg.Traffic == nil {
		return s
	}
	for _, b := range k.cfg.Traffic.Breakers("", "") {
		kk := key{b.Organization, b.Tool}
		e := s.get(kk.org, kk.tool)
		if !e.known {
			e.health = 1
		}
		switch b.State {
		case resilience.Open:
			e.health = 0
		case resilience.HalfOpen:
			e.health = min(e.health, 0.5)
		default:
			if b.Samples >= k.cfg.MinCalls {
				e.health = min(e.health, 1-float64(b.Failures)/float64(b.Samples))
			} else if !e.known {
				continue // a closed breaker with too few samples says nothing
			}
		}
		e.known = true
		s.set(kk, e)
	}
	return s
}
