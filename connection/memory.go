package connection

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// Bounds of what a node keeps in memory: a node serving more organizations
// or connections than this reads the rest from the store, as it would
// without memory. Evicting is arbitrary (a map's order): the bounds are a
// guard against growth, not a policy of what is hot.
const (
	maxKeptOrgs     = 1024 // organizations whose reads are kept
	maxKeptReads    = 64   // reads kept per organization
	maxKeptVersions = 4096 // connection versions opened and compiled
	maxKeptHosts    = 4096 // HTTP tool URLs whose host is kept
)

// memory is what a node keeps of connections between calls: the broker's
// reads of the store, by organization, and for each connection version
// its secrets opened and its egress rules compiled.
//
// The reads are trusted only while the store's feed (toolplane.ConnectionFeed)
// says they are current: every change the feed tells forgets the
// organization's reads before anything else is read, and a read that
// began before a change is not kept after it (gen). While no feed is
// watched, or while it has lost its connection to the store, every call
// reads the store.
//
// A connection version's opened secrets and compiled rules are kept
// whatever the feed says (a version's are the same on every read), and
// forgotten when the connection changes, so a revoked connection's secret
// does not stay in memory.
type memory struct {
	now func() time.Time // real time, whatever clock the service is given

	mu sync.RWMutex
	// gen counts the changes told: a read of the store started at one
	// generation is kept only if no change came before it ends.
	gen uint64
	// until is when the kept reads stop being trusted unless the feed
	// says more; the zero time trusts nothing.
	until    time.Time
	orgs     map[string]*orgReads
	versions map[versionKey]*derived
	// Demand tells a feed whose Current costs work when memory is read.
	toolplane.Demand
}

// versionKey names a connection in versions: its organization and ID, so
// that what is kept of one organization's connection (its opened secrets)
// is never answered for another's, whatever their IDs.
type versionKey struct{ org, id string }

// orgReads are one organization's reads of the store.
type orgReads struct {
	lists map[listQuery]listed
	gets  map[string]*toolplane.Connection
}

// listQuery is one of the broker's listings: an organization's
// connections of a provider in one state.
type listQuery struct {
	provider string
	state    toolplane.ConnectionState
}

// listed is what a listing answered.
type listed struct {
	cs   []toolplane.Connection
	next string
}

// derived is what a connection version's calls need beyond its row: its
// secrets opened (only once needed) and its egress rules compiled (only
// once needed).
type derived struct {
	version int64
	opened  *toolplane.Secrets
	policy  *egress.Policy
	// shown is what a call is answered of the row from (see shown). Calls
	// that read the very row memory keeps, which is never changed, share
	// it instead of copying the row each.
	shown, from *toolplane.Connection
}

func newMemory() *memory {
	return &memory{now: time.Now, orgs: map[string]*orgReads{}, versions: map[versionKey]*derived{}}
}

var _ toolplane.ConnectionWatcher = (*memory)(nil)

// ConnectionChanged forgets what was kept of the organization's reads and
// of the connection's versions.
func (m *memory) ConnectionChanged(org, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	delete(m.orgs, org)
	delete(m.versions, versionKey{org, id})
}

// ConnectionsCurrent trusts the kept reads until the time given.
func (m *memory) ConnectionsCurrent(until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.until = until
}

// ConnectionsLost forgets every read kept and trusts none until told
// again.
func (m *memory) ConnectionsLost() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	m.until = time.Time{}
	clear(m.orgs)
	clear(m.versions)
}

// trusted reports whether kept reads may answer now, and tells the feed
// of the read (see toolplane.TrustDemand); m.mu is held.
func (m *memory) trusted() bool {
	ok := !m.until.IsZero() && m.now().Before(m.until)
	m.Read(ok)
	return ok
}

// list answers the organization's connections of provider in state, at
// most limit, from memory when it is trusted, or else from the store; a
// nil memory reads the store. The answer may be what memory keeps: the
// caller never changes it (nor appends to it in place).
func (m *memory) list(ctx context.Context, store Store, org string, q listQuery, limit int) ([]toolplane.Connection, string, error) {
	if m == nil {
		return store.ListConnections(ctx, org, toolplane.ConnectionFilter{Provider: q.provider, State: q.state}, "", limit)
	}
	m.mu.RLock()
	gen, trusted := m.gen, m.trusted()
	if r, ok := m.orgs[org]; ok && trusted {
		if l, ok := r.lists[q]; ok {
			m.mu.RUnlock()
			return l.cs, l.next, nil
		}
	}
	m.mu.RUnlock()
	cs, next, err := store.ListConnections(ctx, org, toolplane.ConnectionFilter{Provider: q.provider, State: q.state}, "", limit)
	if err != nil {
		return nil, "", err
	}
	m.keep(gen, org, func(r *orgReads) {
		if len(r.lists) >= maxKeptReads {
			evictOne(r.lists)
		}
		// Clipped, so that appending to what a call is answered copies.
		r.lists[q] = listed{cs: slices.Clip(append([]toolplane.Connection(nil), cs...)), next: next}
	})
	return cs, next, nil
}

// get answers the organization's connection id, from memory when it is
// trusted, or else from the store; a nil memory reads the store. The
// answer may be what memory keeps: the caller never changes it.
func (m *memory) get(ctx context.Context, store Store, org, id string) (*toolplane.Connection, error) {
	if m == nil {
		return store.GetConnection(ctx, org, id)
	}
	m.mu.RLock()
	gen, trusted := m.gen, m.trusted()
	if r, ok := m.orgs[org]; ok && trusted {
		if c, ok := r.gets[id]; ok {
			m.mu.RUnlock()
			return c, nil
		}
	}
	m.mu.RUnlock()
	c, err := store.GetConnection(ctx, org, id)
	if err != nil {
		return nil, err
	}
	v := *c
	m.keep(gen, org, func(r *orgReads) {
		if len(r.gets) >= maxKeptReads {
			evictOne(r.gets)
		}
		r.gets[id] = &v
	})
	return c, nil
}

// keep stores a read of the organization's begun at generation gen,
// unless a change was told since: the read may predate it.
func (m *memory) keep(gen uint64, org string, put func(*orgReads)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen {
		return
	}
	r, ok := m.orgs[org]
	if !ok {
		if len(m.orgs) >= maxKeptOrgs {
			evictOne(m.orgs)
		}
		r = &orgReads{lists: map[listQuery]listed{}, gets: map[string]*toolplane.Connection{}}
		m.orgs[org] = r
	}
	put(r)
}

// version answers what is kept of c's version, and false when nothing is.
func (m *memory) version(c *toolplane.Connection) (derived, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	d, ok := m.versions[versionKey{c.OrganizationID, c.ID}]
	if !ok || d.version != c.Version {
		return derived{}, false
	}
	return *d, true
}

// keepVersion adds to what is kept of c's version, dropping what was kept
// of another version of c.
func (m *memory) keepVersion(c *toolplane.Connection, add func(*derived)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := versionKey{c.OrganizationID, c.ID}
	d, ok := m.versions[k]
	if !ok || d.version != c.Version {
		if !ok && len(m.versions) >= maxKeptVersions {
			evictOne(m.versions)
		}
		d = &derived{version: c.Version}
	} else {
		v := *d // readers hold copies; a kept entry is never changed
		d = &v
	}
	add(d)
	m.versions[k] = d
}

// forget drops what is kept of the connection, as a change told does: a
// change this node made is forgotten at once, whatever the feed's delay.
func (m *memory) forget(org, id string) { m.ConnectionChanged(org, id) }

// evictOne deletes one entry of a full map.
func evictOne[K comparable, V any](m map[K]V) {
	for k := range m {
		delete(m, k)
		return
	}
}

// Watch follows the store's changes to connections until ctx ends, so the
// broker keeps what it read of the store between calls (see the package
// documentation); it answers ctx's error then. A store that tells no
// changes (one that is not a toolplane.ConnectionFeed) makes Watch
// answer nil at once: every call reads the store.
func (s *Broker) Watch(ctx context.Context) error {
	feed, ok := s.cfg.Store.(toolplane.ConnectionFeed)
	if !ok {
		return nil
	}
	// Whatever ended the watch, nothing kept is trusted after it.
	defer s.mem.ConnectionsLost()
	if err := feed.WatchConnections(ctx, s.mem); err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch connections: %w", err)
	}
	return ctx.Err()
}

// settle waits, after a change to a connection is committed, until every
// node has been told of it or trusts nothing it kept: from then on, no
// call on any node uses what it kept from before the change.
func (s *core) settle(ctx context.Context) {
	feed, ok := s.cfg.Store.(toolplane.ConnectionFeed)
	if !ok || feed.ConnectionSettle() <= 0 {
		return
	}
	t := time.NewTimer(feed.ConnectionSettle())
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// insert stores c, and forgets at once what this node kept of its
// organization's connections, whatever the feed's delay.
func (s *core) insert(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) error {
	defer s.mem.forget(c.OrganizationID, c.ID)
	return s.cfg.Store.InsertConnection(ctx, c, ch)
}

// update writes c, and forgets at once what this node kept of it. It
// forgets even when the write failed: a commit whose answer was lost may
// have written.
func (s *core) update(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) (bool, error) {
	defer s.mem.forget(c.OrganizationID, c.ID)
	return s.cfg.Store.UpdateConnection(ctx, c, ch)
}

// hosts keeps the host of each HTTP tool URL the broker checked against a
// connection's egress rules: a tool's URL is its definition's, the same
// on every call, and parsing it is most of what the check costs.
type hosts struct {
	mu   sync.RWMutex
	kept map[string]string
}

// host answers the host name of rawURL, false when it does not parse.
func (h *hosts) host(rawURL string) (string, bool) {
	h.mu.RLock()
	name, ok := h.kept[rawURL]
	h.mu.RUnlock()
	if ok {
		return name, true
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", false
	}
	name = u.Hostname()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kept == nil {
		h.kept = map[string]string{}
	}
	if len(h.kept) >= maxKeptHosts {
		evictOne(h.kept)
	}
	h.kept[rawURL] = name
	return name, true
}
