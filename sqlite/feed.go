package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

var (
	_ toolplane.ConnectionFeed = (*Store)(nil)
	_ toolplane.ChangeFeed     = (*Store)(nil)
)

// watcher is one WatchChanges under way.
type watcher struct {
	topic toolplane.Topic
	w     toolplane.ChangeWatcher
}

// forever is the trust a watcher of this store is given: it is told of
// every change before the write returns, so what it kept stays current.
var forever = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// WatchConnections tells w of every connection this Store writes, before
// the write returns to its caller, until ctx ends: the watch of
// TopicConnections (see WatchChanges).
func (s *Store) WatchConnections(ctx context.Context, w toolplane.ConnectionWatcher) error {
	return s.WatchChanges(ctx, toolplane.TopicConnections, toolplane.ConnectionChanges(w))
}

// WatchChanges tells w of every change of the topic this Store writes,
// before the write returns to its caller, until ctx ends. An embedded
// database is one node's: a write made through another Store on the same
// file (another process) is not told.
func (s *Store) WatchChanges(ctx context.Context, topic toolplane.Topic, w toolplane.ChangeWatcher) error {
	switch topic {
	case toolplane.TopicConnections, toolplane.TopicOAuth, toolplane.TopicCatalog, toolplane.TopicUpstreamSettings:
	default:
		return fmt.Errorf("watch changes: no topic %q: %w", topic, toolplane.ErrInvalid)
	}
	me := &watcher{topic: topic, w: w}
	s.watchMu.Lock()
	if s.watchers == nil {
		s.watchers = map[*watcher]struct{}{}
	}
	s.watchers[me] = struct{}{}
	s.watchMu.Unlock()
	// What w kept before it was told of changes may have missed some.
	w.Lost()
	w.Current(forever)
	<-ctx.Done()
	s.watchMu.Lock()
	delete(s.watchers, me)
	s.watchMu.Unlock()
	return ctx.Err()
}

// ConnectionSettle is zero: a watcher is told of a change before the
// write returns.
func (s *Store) ConnectionSettle() time.Duration { return 0 }

// ChangeSettle is zero: a watcher is told of a change before the write
// returns.
func (s *Store) ChangeSettle() time.Duration { return 0 }

// changed tells the watchers that the organization's connection id was
// written. It is called once the write ended, whatever its outcome: a
// commit whose answer was lost may have written.
func (s *Store) changed(org, id string) { s.tell(toolplane.TopicConnections, org, id) }

// oauthChanged tells the watchers of TopicOAuth that the organization's
// grant or key id (any of its, when id is empty) was written, once the
// write ended, whatever its outcome.
func (s *Store) oauthChanged(org, id string) { s.tell(toolplane.TopicOAuth, org, id) }

// catalogChanged tells the watchers of TopicCatalog that a version of the
// organization's tool name was written, once the write ended, whatever its
// outcome.
func (s *Store) catalogChanged(org, name string) { s.tell(toolplane.TopicCatalog, org, name) }

// upstreamSettingsChanged tells the watchers of TopicUpstreamSettings that
// a setting of the upstream was written, once the write ended, whatever
// its outcome.
func (s *Store) upstreamSettingsChanged(upstream string) {
	s.tell(toolplane.TopicUpstreamSettings, "", upstream)
}

// tell tells the topic's watchers of a change.
func (s *Store) tell(topic toolplane.Topic, org, id string) {
	s.watchMu.RLock()
	defer s.watchMu.RUnlock()
	for w := range s.watchers {
		if w.topic == topic {
			w.w.Changed(org, id)
		}
	}
}
