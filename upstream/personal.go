package upstream

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/handler"
)

// Calls made with people's tokens.
//
// A server bound to a connection provider (Config.Connection) is called
// with the access token the broker released for the call: the token of
// the person the call is made for. Each token gets a session of its own,
// opened with it and used for nothing else, so what a server keeps per
// session (its authorization decision included) never crosses from one
// person to another. The shared session, opened with the configured
// headers, only lists the tools and follows their changes; a call never
// goes out on it.
//
// A session opened with a person's token goes out under the egress rules
// of the person's connection, as an http tool's request does: the
// server's URL is the operator's, but the token is the connection's, and
// its rules say where it may be sent. Each session dials through a policy
// compiled from the rules it was opened under, and rules that change open
// a new session.

// maxPersonal bounds the sessions a server keeps open with people's
// tokens. The least recently used is closed to make room: the next call
// with its token opens it again.
const maxPersonal = 256

// errNoToken refuses a call to a server bound to a connection provider
// that did not come with an access token of that provider.
var errNoToken = errors.New("the call carries no access token of the server's connection provider")

// personal is one server's sessions opened with people's tokens, most
// recently used first.
type personal struct {
	mu     sync.Mutex
	order  *list.List // of *tokenSession
	byKey  map[string]*list.Element
	byConn map[string]*list.Element
}

// tokenSession is a session opened with one access token of one
// connection.
type tokenSession struct {
	// key is the connection's ID and a hash of the token and the egress
	// rules: a renewed token, or changed rules, is another session, and
	// the token itself is kept only by the transport presenting it.
	key, conn string
	// ready is closed once the session is open, or failed to (err).
	ready chan struct{}
	cs    *mcp.ClientSession
	hc    *http.Client
	err   error
	// refs counts the calls using the session; gone marks one evicted,
	// closed once no call uses it.
	refs int
	gone bool
}

func newPersonal() *personal {
	return &personal{order: list.New(), byKey: map[string]*list.Element{}, byConn: map[string]*list.Element{}}
}

// tokenKey answers the cache key of a connection's token under its
// egress rules.
func tokenKey(conn, token string, rules toolplane.EgressRules) (string, error) {
	r, err := json.Marshal(rules)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(token))
	h.Write([]byte{0})
	h.Write(r)
	return conn + ":" + hex.EncodeToString(h.Sum(nil)), nil
}

// egressRefused is a call the egress rules of its connection refused
// before anything was sent to the server.
type egressRefused struct {
	conn string
	err  *egress.RefusedError
}

func (e *egressRefused) Error() string {
	return "the egress rules of connection " + e.conn + " refuse the server: " + e.err.Error() + "; nothing was sent"
}

// refusedByEgress answers err as an egressRefused when the connection's
// egress rules refused a dial or a redirect in it.
func refusedByEgress(conn string, err error) (*egressRefused, bool) {
	var re *egress.RefusedError
	if !errors.As(err, &re) {
		return nil, false
	}
	return &egressRefused{conn: conn, err: re}, true
}

// acquire answers the session of the connection's token, opening it when
// there is none; release must be called once the call is done with it. A
// session of another token of the same connection is closed: the
// connection's token changed.
func (p *personal) acquire(ctx context.Context, u *upstream, c *toolplane.Connection, token string) (*tokenSession, error) {
	conn := c.ID
	key, err := tokenKey(conn, token, c.Config.Egress)
	if err != nil {
		return nil, &handler.Unavailable{Err: fmt.Errorf("connection %s: egress rules: %w", conn, err)}
	}
	p.mu.Lock()
	el, ok := p.byKey[key]
	if ok {
		p.order.MoveToFront(el)
	} else {
		var idle []*mcp.ClientSession
		if old, ok := p.byConn[conn]; ok {
			idle = append(idle, p.evict(old))
		}
		s := &tokenSession{key: key, conn: conn, ready: make(chan struct{})}
		el = p.order.PushFront(s)
		p.byKey[key], p.byConn[conn] = el, el
		for p.order.Len() > maxPersonal {
			idle = append(idle, p.evict(p.order.Back()))
		}
		for _, cs := range idle {
			if cs != nil {
				go closeSession(cs)
			}
		}
		// Opened apart from the call that asked first: every call waiting
		// for it is bounded by its own context, and the session outlives
		// them.
		go p.open(context.WithoutCancel(ctx), u, s, token, c.Config.Egress)
	}
	s := el.Value.(*tokenSession)
	s.refs++
	p.mu.Unlock()
	select {
	case <-s.ready:
	case <-ctx.Done():
		p.release(s)
		return nil, &handler.Unavailable{Err: fmt.Errorf("open a session on %s: %w", u.cfg.Slug, ctx.Err())}
	}
	if s.err != nil {
		p.release(s)
		return nil, s.err
	}
	return s, nil
}

// open connects s with token, under rules, and tells its waiters. A
// session that fails to open is forgotten, so the next call tries again.
func (p *personal) open(ctx context.Context, u *upstream, s *tokenSession, token string, rules toolplane.EgressRules) {
	var (
		cs  *mcp.ClientSession
		hc  *http.Client
		err error
	)
	policy, err := egress.Compile(rules)
	if err == nil {
		rec := &answered{}
		cs, hc, err = u.connect(withAnswered(ctx, rec), personalClient(token, policy))
		if err != nil {
			policy.CloseIdleConnections()
			if refused, ok := refusedByEgress(s.conn, err); ok {
				err = refused
			} else if code, ok := rec.refusal(); ok {
				err = &handler.CredentialRefused{Err: fmt.Errorf("%s refused the token opening a session: HTTP %d", u.cfg.Slug, code)}
			} else {
				// The call was not sent.
				err = &handler.Unavailable{Err: u.scrub(err)}
			}
		}
	} else {
		err = &handler.Unavailable{Err: fmt.Errorf("connection %s: egress rules: %w", s.conn, err)}
	}
	p.mu.Lock()
	s.cs, s.hc, s.err = cs, hc, err
	if err != nil {
		p.forget(s)
	}
	closeNow := err == nil && s.gone && s.refs == 0
	close(s.ready)
	p.mu.Unlock()
	if err != nil {
		return
	}
	if closeNow {
		closeSession(cs)
		return
	}
	go func() {
		// The server ended the session (or it was closed here): it is
		// forgotten, and the next call with the token opens another. Its
		// policy's connections serve no other session.
		_ = cs.Wait()
		p.drop(cs)
		policy.CloseIdleConnections()
	}()
}

// release ends a call's use of s, closing it if it was evicted meanwhile.
func (p *personal) release(s *tokenSession) {
	p.mu.Lock()
	s.refs--
	closeNow := s.gone && s.refs == 0 && s.cs != nil
	p.mu.Unlock()
	if closeNow {
		closeSession(s.cs)
	}
}

// drop evicts the session cs, if it is one of these: the server no longer
// knows it, or refused its token.
func (p *personal) drop(cs *mcp.ClientSession) {
	p.mu.Lock()
	var idle *mcp.ClientSession
	for el := p.order.Front(); el != nil; el = el.Next() {
		if s := el.Value.(*tokenSession); s.cs == cs {
			idle = p.evict(el)
			break
		}
	}
	p.mu.Unlock()
	if idle != nil {
		closeSession(idle)
	}
}

// closeAll closes every session, when the set closes.
func (p *personal) closeAll() {
	p.mu.Lock()
	var idle []*mcp.ClientSession
	for el := p.order.Front(); el != nil; {
		next := el.Next()
		if cs := p.evict(el); cs != nil {
			idle = append(idle, cs)
		}
		el = next
	}
	p.mu.Unlock()
	for _, cs := range idle {
		closeSession(cs)
	}
}

// evict forgets the session of el and marks it gone. It answers the
// session when the caller must close it (it is open and no call uses it),
// once p.mu is released; otherwise the last call using it, or its
// opening, closes it. p.mu is held.
func (p *personal) evict(el *list.Element) *mcp.ClientSession {
	s := el.Value.(*tokenSession)
	p.forget(s)
	s.gone = true
	if s.refs > 0 {
		return nil
	}
	return s.cs
}

// forget removes s from the cache. p.mu is held.
func (p *personal) forget(s *tokenSession) {
	el, ok := p.byKey[s.key]
	if !ok || el.Value.(*tokenSession) != s {
		return
	}
	p.order.Remove(el)
	delete(p.byKey, s.key)
	if p.byConn[s.conn] == el {
		delete(p.byConn, s.conn)
	}
}

// len answers how many sessions are kept.
func (p *personal) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.order.Len()
}

// closeSession ends a session at the server, bounded: a server that does
// not answer its end must not hold anything up.
func closeSession(cs *mcp.ClientSession) {
	done := make(chan struct{})
	go func() { _ = cs.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// personalClient answers the HTTP client of a session opened with token:
// every request carries the token as its bearer, and nothing of the
// configured headers, whose credential is toolplane's own. It dials, and
// follows redirects, only where the connection's egress policy allows.
func personalClient(token string, policy *egress.Policy) *http.Client {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	hc := policy.Client(0)
	hc.Transport = answerTransport{headerTransport{h, hc.Transport}}
	return hc
}

// answered records the status of the first response to a request made
// under a context: the call's own request, whose refusal (a 401, a 403)
// says the server did nothing with it. A later request under the same
// context (an answer to a request the server sent on the call's stream)
// is not the call's.
type answered struct {
	mu     sync.Mutex
	status int
}

type answeredKey struct{}

func withAnswered(ctx context.Context, a *answered) context.Context {
	return context.WithValue(ctx, answeredKey{}, a)
}

// answered answers the first response's status, 0 before any.
func (a *answered) answered() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status
}

// refusal answers the first response's status when it refused the
// request's credential.
func (a *answered) refusal() (int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status, a.status == http.StatusUnauthorized || a.status == http.StatusForbidden
}

// answerTransport records, for a context carrying an answered, the status
// of its first response.
type answerTransport struct{ base http.RoundTripper }

func (t answerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if a, ok := r.Context().Value(answeredKey{}).(*answered); ok && err == nil {
		a.mu.Lock()
		if a.status == 0 {
			a.status = resp.StatusCode
		}
		a.mu.Unlock()
	}
	return resp, err
}

// callAs calls a remote tool of a server bound to a connection provider,
// on the session of the access token released for the call.
func (u *upstream) callAs(ctx context.Context, call handler.Call, name string, args any) (any, error) {
	rel := call.Released
	if rel == nil || rel.Connection == nil || rel.Connection.Provider != u.cfg.Connection || rel.Secrets.AccessToken == "" {
		// Never the shared session instead: its credential is
		// toolplane's own, not the person's.
		return nil, &handler.Unavailable{Err: fmt.Errorf("%s on %s: %w", name, u.cfg.Slug, errNoToken)}
	}
	u.mu.Lock()
	t, listed := u.remote[name]
	structured := listed && t.OutputSchema != nil
	u.mu.Unlock()
	s, err := u.personal.acquire(ctx, u, rel.Connection, rel.Secrets.AccessToken.Reveal())
	if err != nil {
		return nil, err
	}
	defer u.personal.release(s)
	rec := &answered{}
	cctx := withAnswered(ctx, rec)
	var out any
	if lean(s.cs, s.hc) {
		out, err = u.callHTTP(cctx, s.cs, senderOf(s.hc), name, metaOf(ctx, call), args, structured)
	} else {
		out, err = u.callSDK(cctx, s.cs, name, metaOf(ctx, call), args, structured)
	}
	if err != nil {
		if refused, ok := refusedByEgress(rel.Connection.ID, err); ok && rec.answered() == 0 {
			// Refused at a dial, before any answer to the call's request:
			// nothing reached the server. (A redirect refused was an
			// answer to a request the server had.)
			return nil, refused
		}
		if code, ok := rec.refusal(); ok {
			// The call's own request was refused before the server
			// did anything with it: the token is no good here.
			u.personal.drop(s.cs)
			return nil, &handler.CredentialRefused{Err: fmt.Errorf("%s refused the token of connection %s: HTTP %s", u.cfg.Slug, rel.Connection.ID, strconv.Itoa(code))}
		}
	}
	return out, u.scrub(err)
}
