package sqlite

import (
	"context"
	"time"

	"github.com/toolplane/toolplane"
)

var _ toolplane.ConnectionFeed = (*Store)(nil)

// watcher is one WatchConnections under way.
type watcher struct{ w toolplane.ConnectionWatcher }

// forever is the trust a watcher of this store is given: it is told of
// every change before the write returns, so what it kept stays current.
var forever = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// WatchConnections tells w of every connection this Store writes, before
// the write returns to its caller, until ctx ends. An embedded database is
// one node's: a write made through another Store on the same file (another
// process) is not told.
func (s *Store) WatchConnections(ctx context.Context, w toolplane.ConnectionWatcher) error {
	me := &watcher{w: w}
	s.watchMu.Lock()
	if s.watchers == nil {
		s.watchers = map[*watcher]struct{}{}
	}
	s.watchers[me] = struct{}{}
	s.watchMu.Unlock()
	// What w kept before it was told of changes may have missed some.
	w.ConnectionsLost()
	w.ConnectionsCurrent(forever)
	<-ctx.Done()
	s.watchMu.Lock()
	delete(s.watchers, me)
	s.watchMu.Unlock()
	return ctx.Err()
}

// ConnectionSettle is zero: a watcher is told of a change before the
// write returns.
func (s *Store) ConnectionSettle() time.Duration { return 0 }

// changed tells the watchers that the organization's connection id was
// written. It is called once the write ended, whatever its outcome: a
// commit whose answer was lost may have written.
func (s *Store) changed(org, id string) {
	s.watchMu.RLock()
	defer s.watchMu.RUnlock()
	for w := range s.watchers {
		w.w.ConnectionChanged(org, id)
	}
}
