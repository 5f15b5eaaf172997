package authserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
)

// maxKeptConsents bounds the consents a node keeps found in force: past
// it, one kept answer (an arbitrary one: a map's order) is dropped for
// each new one. The bound guards against growth; it is not a policy of
// what is hot.
const maxKeptConsents = 10_000

// standing is a consent found in force: its grant, the person's roles
// (the grant's, or their key's when they consented with it), when that
// key expires (zero: no key, or one that never expires), and when the
// OpenID sign-in behind it reaches Config.OIDCMaxAge (zero: a key's
// consent, or no bound). Nothing in it is changed once made; calls share
// it.
type standing struct {
	g          *toolplane.OAuthGrant
	roles      []string
	keyExpires time.Time
	signInEnds time.Time
}

// at answers nil when the consent still stands at now as far as time
// goes, or an error wrapping ErrInvalid: the grant's end, the key's and
// the sign-in's bound are checked against now on every call, whether the
// rest was read or kept.
func (st *standing) at(now time.Time) error {
	switch {
	case !st.g.Live(now):
		return fmt.Errorf("%w: the consent was revoked or ended", ErrInvalid)
	case !st.keyExpires.IsZero() && !now.Before(st.keyExpires):
		return fmt.Errorf("%w: the person's key the consent was given with is revoked or ended", ErrInvalid)
	case !st.signInEnds.IsZero() && !now.Before(st.signInEnds):
		return fmt.Errorf("%w: %s", ErrInvalid, staleSignIn)
	}
	return nil
}

// signInEnds answers when g's OpenID sign-in reaches maxAge (a Config's
// OIDCMaxAge once defaulted: zero or less is no bound), past which
// neither its tokens nor the calls run later under it are honoured: the
// roles it carries are the provider's of then. A consent given with a
// person's key answers the zero time: the key is checked instead.
func signInEnds(g *toolplane.OAuthGrant, maxAge time.Duration) time.Time {
	if g.PersonKey != "" || maxAge <= 0 {
		return time.Time{}
	}
	return g.SignedInAt.Add(maxAge)
}

// consents is what a node keeps of consents found in force, by
// organization and grant, so that a call with an access token need not
// read its grant (and the person's key) from the store.
//
// What is kept is trusted only while the store's change feed
// (toolplane.ChangeFeed, TopicOAuth) says it is current: each change told
// forgets the grant named, and every grant read with the key named,
// before anything else is read, and a read that began before a change is
// not kept after it (gen). While no feed is watched, or while it lost its
// connection to the store or is not caught up, every call reads the store,
// as it would without memory. Only consents found in force are kept:
// never a refusal, never a store's error.
type consents struct {
	now func() time.Time // real time, whatever clock the server is given
	max int

	mu sync.RWMutex
	// gen counts the changes told: a read of the store started at one
	// generation is kept only if no change came before it ends.
	gen uint64
	// until is when what is kept stops being trusted unless the feed says
	// more; the zero time trusts nothing.
	until time.Time
	orgs  map[string]map[string]*standing
	n     int // consents kept, over every organization
	// Demand tells a feed whose Current costs work when what is kept is
	// read.
	toolplane.Demand
}

func newConsents(max int) *consents {
	return &consents{now: time.Now, max: max, orgs: map[string]map[string]*standing{}}
}

var _ toolplane.ChangeWatcher = (*consents)(nil)

// Changed forgets the organization's grant id and every consent of the
// organization given with the key id (a change told names either), or
// everything of the organization when id is empty.
func (c *consents) Changed(org, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	kept, ok := c.orgs[org]
	if !ok {
		return
	}
	if id == "" {
		c.n -= len(kept)
		delete(c.orgs, org)
		return
	}
	for grant, st := range kept {
		if grant == id || st.g.PersonKey == id {
			delete(kept, grant)
			c.n--
		}
	}
	if len(kept) == 0 {
		delete(c.orgs, org)
	}
}

// Current trusts what is kept until the time given.
func (c *consents) Current(until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.until = until
}

// Lost forgets everything kept and trusts nothing until told again.
func (c *consents) Lost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.until = time.Time{}
	clear(c.orgs)
	c.n = 0
}

// get answers the organization's grant id as kept, and false when it is
// not kept or what is kept is not trusted now; gen is the generation to
// keep a read of the store under.
func (c *consents) get(org, id string) (st *standing, gen uint64, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	trusted := !c.until.IsZero() && c.now().Before(c.until)
	c.Read(trusted)
	if !trusted {
		return nil, c.gen, false
	}
	st, ok = c.orgs[org][id]
	return st, c.gen, ok
}

// keep stores the organization's grant id, read at generation gen, unless
// a change was told since: the read may predate it.
func (c *consents) keep(gen uint64, org, id string, st *standing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	kept, ok := c.orgs[org]
	if _, again := kept[id]; !again && c.n >= c.max {
		c.evictOne()
		kept, ok = c.orgs[org]
	}
	if !ok {
		kept = map[string]*standing{}
		c.orgs[org] = kept
	}
	if _, again := kept[id]; !again {
		c.n++
	}
	kept[id] = st
}

// evictOne drops one kept consent; c.mu is held.
func (c *consents) evictOne() {
	for org, kept := range c.orgs {
		for id := range kept {
			delete(kept, id)
			c.n--
			break
		}
		if len(kept) == 0 {
			delete(c.orgs, org)
		}
		return
	}
}

// len answers how many consents are kept.
func (c *consents) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.n
}

// inForce answers the organization's grant id as it stands at now: from
// memory when it is kept and trusted, or else from the store, as
// grantInForce decides it.
func (v *Verifier) inForce(ctx context.Context, org, id string, now time.Time) (*standing, error) {
	st, gen, ok := v.consents.get(org, id)
	if ok {
		if err := st.at(now); err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := grantInForce(ctx, v.s.cfg.Store, org, id, v.s.cfg.OIDCMaxAge, now)
	if err != nil {
		return nil, err
	}
	v.consents.keep(gen, org, id, st)
	return st, nil
}

// Watch follows the store's changes to OAuth grants and API keys until
// ctx ends, so that the verifier keeps the consents it found in force
// between calls (see consents); it answers ctx's error then. A store that
// tells no changes (one that is not a toolplane.ChangeFeed) makes Watch
// answer nil at once: every call reads the store.
func (s *Server) Watch(ctx context.Context) error {
	feed := s.feed
	if feed == nil {
		return nil
	}
	// Whatever ended the watch, nothing kept is trusted after it.
	defer s.verify.consents.Lost()
	if err := feed.WatchChanges(ctx, toolplane.TopicOAuth, s.verify.consents); err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch oauth changes: %w", err)
	}
	return ctx.Err()
}

// settling is the server's store with each revocation of a grant
// answered only once it holds on every node: this node forgets the grant
// at once, and the revocation waits the feed's ChangeSettle, by when
// every node's verifier has been told of it or trusts nothing it kept.
// Every revocation the server makes (an admin's, a person's, a client's
// through RFC 7009, a replayed code's, a reused refresh token's, a client
// revoked) goes through it.
type settling struct {
	Store
	feed     toolplane.ChangeFeed // nil when the store tells no changes
	consents *consents
}

// RevokeOAuthGrant revokes the grant (with its event), and answers once
// that settled.
func (s settling) RevokeOAuthGrant(ctx context.Context, org, id, reason string, at time.Time, e *toolplane.AuditEvent) (bool, error) {
	ok, err := s.Store.RevokeOAuthGrant(ctx, org, id, reason, at, e)
	s.settle(ctx, org, id)
	return ok, err
}

// RevokeOAuthClient revokes the client and its grants (with its event),
// and answers once that settled.
func (s settling) RevokeOAuthClient(ctx context.Context, c *toolplane.OAuthClientSetting, reason string, e *toolplane.AuditEvent) (int, error) {
	n, err := s.Store.RevokeOAuthClient(ctx, c, reason, e)
	s.settle(ctx, c.OrganizationID, "")
	return n, err
}

// settle forgets what this node kept of org's grant id (of every grant of
// org when id is empty), then waits the feed's ChangeSettle or until ctx
// ends. It runs whatever the write answered: a commit whose answer was
// lost may have written, and a revocation found already made may be
// another request's, not yet settled.
func (s settling) settle(ctx context.Context, org, id string) {
	s.consents.Changed(org, id)
	if s.feed == nil || s.feed.ChangeSettle() <= 0 {
		return
	}
	t := time.NewTimer(s.feed.ChangeSettle())
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
