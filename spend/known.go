package spend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
)

// DefaultKnownFor is how long a node trusts what it read of whether an
// organization has a daily ceiling: a ceiling set on another node is
// enforced here at most this long after it was set (on the node that set
// it, at once).
const DefaultKnownFor = 2 * time.Second

// maxKnown bounds how many organizations a Known remembers; past it, it
// starts over (the organizations are registered ones, so this is a
// safeguard, not a working limit).
const maxKnown = 100_000

// Known remembers, for a little while, whether each organization has a
// daily ceiling, so that a metered call of an organization without one
// skips reading its day's counter: most have none, and that read is a
// round trip to the store on every metered call. An organization with a
// ceiling has its counter read on every call, so its ceiling holds
// across nodes as before; what may lag (by For) is a ceiling newly set
// on another node. It is safe for concurrent use.
type Known struct {
	store toolplane.SpendStore
	// For is how long an answer is trusted (DefaultKnownFor when zero).
	For time.Duration
	now func() time.Time

	mu   sync.Mutex
	seen map[string]known
}

type known struct {
	has bool
	at  time.Time
}

// NewKnown answers a Known over store; now is its clock, time.Now when
// nil.
func NewKnown(store toolplane.SpendStore, now func() time.Time) *Known {
	if now == nil {
		now = time.Now
	}
	return &Known{store: store, now: now, seen: make(map[string]known)}
}

// HasCeiling answers whether org has a daily ceiling, from memory when it
// was read less than For ago.
func (k *Known) HasCeiling(ctx context.Context, org string) (bool, error) {
	now := k.now()
	ttl := k.For
	if ttl <= 0 {
		ttl = DefaultKnownFor
	}
	k.mu.Lock()
	s, ok := k.seen[org]
	k.mu.Unlock()
	if ok && now.Sub(s.at) < ttl && !now.Before(s.at) {
		return s.has, nil
	}
	_, err := k.store.GetSpendCeiling(ctx, org)
	has := err == nil
	if err != nil && !errors.Is(err, toolplane.ErrNotFound) {
		return false, fmt.Errorf("daily spend ceiling of %s: %w", org, err)
	}
	k.mu.Lock()
	if len(k.seen) >= maxKnown {
		clear(k.seen)
	}
	k.seen[org] = known{has: has, at: now}
	k.mu.Unlock()
	return has, nil
}

// Forget drops what k knows of org: its ceiling was just set or removed
// on this node.
func (k *Known) Forget(org string) {
	k.mu.Lock()
	delete(k.seen, org)
	k.mu.Unlock()
}
