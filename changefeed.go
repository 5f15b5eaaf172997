package toolplane

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane/internal/tick"
)

// Topic names what a ChangeFeed tells the changes of.
type Topic string

// The topics a store's change feed tells.
const (
	// TopicConnections: the organization's connections; the ID told is
	// the connection's (ConnectionFeed tells the same through its own
	// watcher).
	TopicConnections Topic = "connections"
	// TopicOAuth: what decides whether an OAuth consent stands. The ID
	// told is a grant's (OAuthGrant.ID: revoked, or otherwise changed) or
	// an API key's (a credential revoked, re-dated, given other roles or
	// deleted: a consent given with a person's own key stands only while
	// the key does); an empty ID is any of the organization's. New grants
	// and keys need not be told: nothing kept can have read them.
	TopicOAuth Topic = "oauth"
	// TopicCatalog: the published tool versions of every organization. The
	// ID told is the tool's name; the organization is the version's. A
	// watcher reloads the catalogue (CatalogStore.CatalogRevision says
	// whether anything moved), so a publish, a review or a retirement on
	// one node reaches every node's registry and search index at once
	// rather than at the next poll.
	TopicCatalog Topic = "catalog"
	// TopicUpstreamSettings: the operator's stored upstream tool
	// settings, the deployment's. The organization told is empty, the ID
	// the upstream's slug. A watcher reads the settings again, so a
	// change on one node takes effect on every node at once rather than
	// at the next poll.
	TopicUpstreamSettings Topic = "upstream_settings"
)

// ChangeFeed is a store that tells of what it changes, by topic, on every
// node, so that a node may keep reads in memory between calls and still
// act on a change by the next call once ChangeSettle has passed.
type ChangeFeed interface {
	// WatchChanges tells w of every change of the topic committed while
	// it runs, by any writer of the store (another node's, an operator's
	// statement), until ctx ends; it answers ctx's error then. Once it
	// hears changes, and before it says w is current, it tells w Lost:
	// what w kept before may have missed changes. w must not block.
	WatchChanges(ctx context.Context, topic Topic, w ChangeWatcher) error
	// ChangeSettle is how long after a change commits every watcher of
	// the store, on every node, has been told of it or no longer trusts
	// what it kept (see ChangeWatcher.Current): zero for a store that
	// tells its watchers before a write returns. A change that must hold
	// on every node's next call is answered once ChangeSettle has passed
	// since it committed.
	ChangeSettle() time.Duration
}

// ChangeWatcher is told of changes by a ChangeFeed. Its methods may be
// called from several goroutines at once.
type ChangeWatcher interface {
	// Changed tells that the organization's row id of the topic was
	// changed; an empty id, that any of the organization's may have been.
	Changed(org, id string)
	// Current tells that every change committed so far has been told,
	// and that what the watcher kept may be trusted until the time given
	// (a real-time instant of this process), unless told more.
	Current(until time.Time)
	// Lost tells that changes may have been missed (the feed lost its
	// connection to the store): nothing kept may be trusted until Current
	// says so again.
	Lost()
}

// ConnectionChanges answers w as the ChangeWatcher of TopicConnections:
// a ConnectionFeed's watch is the topic's.
func ConnectionChanges(w ConnectionWatcher) ChangeWatcher { return connectionChanges{w} }

type connectionChanges struct{ w ConnectionWatcher }

func (c connectionChanges) Changed(org, id string)  { c.w.ConnectionChanged(org, id) }
func (c connectionChanges) Current(until time.Time) { c.w.ConnectionsCurrent(until) }
func (c connectionChanges) Lost()                   { c.w.ConnectionsLost() }

// TrustWanted forwards to the connection watcher when it is a TrustDemand,
// and is otherwise always true: Current is wanted all the time.
func (c connectionChanges) TrustWanted() bool {
	if d, ok := c.w.(TrustDemand); ok {
		return d.TrustWanted()
	}
	return true
}

// TrustWake forwards to the connection watcher when it is a TrustDemand.
func (c connectionChanges) TrustWake() <-chan struct{} {
	if d, ok := c.w.(TrustDemand); ok {
		return d.TrustWake()
	}
	return nil
}

// TrustDemand is what a ChangeWatcher (or a ConnectionWatcher) may also
// be: one that tells its feed when what it keeps is read. A feed whose
// Current costs work (PostgreSQL's sends itself a sync point several
// times a second) spends it only while the watcher is read, and slows to
// a keep-alive while it is not: an idle node then does next to nothing.
// The first read after a quiet spell finds nothing trusted, reads the
// store as it would with no memory, and wakes the feed, which tells
// Current again at once. What Current means is unchanged; only how often
// it is told.
type TrustDemand interface {
	// TrustWanted reports whether what the watcher keeps was read since
	// the feed last asked.
	TrustWanted() bool
	// TrustWake answers a channel that receives when a read found nothing
	// trusted; nil, never.
	TrustWake() <-chan struct{}
}

// Demand is a TrustDemand to embed in a watcher, whose reads call Read.
// Its zero value is ready.
type Demand struct {
	read atomic.Bool
	once sync.Once
	wake chan struct{}
}

var _ TrustDemand = (*Demand)(nil)

// Read notes a read of what the watcher keeps, trusted or not: an
// untrusted one wakes the feed. It costs an atomic load on the common
// path, so it sits on every call's read.
func (d *Demand) Read(trusted bool) {
	if !d.read.Load() {
		d.read.Store(true)
	}
	if !trusted {
		select {
		case d.ch() <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// TrustWanted reports whether Read was called since it was last asked.
func (d *Demand) TrustWanted() bool { return d.read.Swap(false) }

// TrustWake receives when a read found nothing trusted.
func (d *Demand) TrustWake() <-chan struct{} { return d.ch() }

func (d *Demand) ch() chan struct{} {
	d.once.Do(func() { d.wake = make(chan struct{}, 1) })
	return d.wake
}

// FollowChanges calls refresh as soon as feed (when not nil) tells of a
// change of topic, or that changes may have been missed, and every
// interval besides, until ctx ends: a change made on another node takes
// effect here within the feed's latency, and the poll still catches what
// a feed that lost its connection did not tell. Changes told while a
// refresh runs make one more. A feed that cannot watch the topic leaves
// the poll. log hears of a refresh that failed and of a feed that ended,
// naming them by what (such as "catalogue").
func FollowChanges(ctx context.Context, feed ChangeFeed, topic Topic, every time.Duration, refresh func(context.Context) error, log *slog.Logger, what string) {
	kick := make(chan struct{}, 1)
	if feed != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			if err := feed.WatchChanges(ctx, topic, refreshWatcher(kick)); err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, what+" change feed ended; polling only", "err", err)
			}
		}()
	}
	// The poll on the node's grid (internal/tick), with its other loops.
	t := tick.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Next()
		case <-kick:
		}
		if err := refresh(ctx); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, what+" refresh failed", "err", err)
		}
	}
}

// refreshWatcher asks FollowChanges for a refresh whenever what it
// follows may have changed: a change told, or changes the feed may have
// missed.
type refreshWatcher chan struct{}

func (w refreshWatcher) kick() {
	select {
	case w <- struct{}{}:
	default: // one is due already
	}
}

func (w refreshWatcher) Changed(org, id string) { w.kick() }
func (w refreshWatcher) Current(time.Time)      {}
func (w refreshWatcher) Lost()                  { w.kick() }

// TrustWanted is false: what is followed is read again on a change or a
// loss and Current is never read, so a feed need only keep itself alive
// (TrustDemand).
func (w refreshWatcher) TrustWanted() bool { return false }

// TrustWake is nil: no read ever waits on Current.
func (w refreshWatcher) TrustWake() <-chan struct{} { return nil }
