package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/handler"
)

// egressClients answers the HTTP client of each set of egress rules and
// key header: the client of one connection's rules dials only where they
// allow, drops the connection's secret headers on a redirect that leaves
// the request's host, and is shared by every call through a connection
// of those rules and that header (its pool of connections with it).
type egressClients struct {
	mu sync.Mutex
	m  map[string]*http.Client
}

// maxClients bounds the clients kept; past it the cache starts over (a
// deployment with that many distinct rule sets pays a new pool each).
const maxClients = 1024

// forRules answers the client of rules for a connection presenting its
// secret in Authorization (bearer, basic, or an OAuth token).
func (e *egressClients) forRules(rules toolplane.EgressRules) (*http.Client, error) {
	return e.client(rules, "")
}

// client answers the client of rules whose redirects also drop header,
// the connection's own key header when it names one.
func (e *egressClients) client(rules toolplane.EgressRules, header string) (*http.Client, error) {
	header = http.CanonicalHeaderKey(header)
	// Every call looks its client up: the key is built in a buffer on the
	// stack, and indexing the map by it converted in place allocates
	// nothing.
	var buf [256]byte
	key := clientKey(buf[:0], rules, header)
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.m[string(key)]; ok {
		return c, nil
	}
	var opts []egress.Option
	if header != "" {
		opts = append(opts, egress.WithSecretHeaders(header))
	}
	p, err := egress.Compile(rules, opts...)
	if err != nil {
		return nil, err
	}
	if e.m == nil || len(e.m) >= maxClients {
		e.m = map[string]*http.Client{}
	}
	// No client timeout: each call's context carries its deadline.
	c := p.Client(0)
	e.m[string(key)] = c
	return c, nil
}

// clientKey appends to dst what tells one client from another: every
// field of rules, then header, each list led by its length and each text
// by its length, so that two different rule sets (a host moved to the
// CIDRs, two hosts joined into one) never share a key. A field added to
// EgressRules is added here (TestClientKeyCoversTheRules fails until it
// is).
func clientKey(dst []byte, rules toolplane.EgressRules, header string) []byte {
	for _, list := range [...][]string{rules.Hosts, rules.AllowCIDRs} {
		dst = strconv.AppendInt(dst, int64(len(list)), 10)
		dst = append(dst, ':')
		for _, s := range list {
			dst = appendText(dst, s)
		}
	}
	return appendText(dst, header)
}

// appendText appends s to dst led by its length.
func appendText(dst []byte, s string) []byte {
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, ':')
	return append(dst, s...)
}

// forReleased answers the client of a released connection. A connection
// presenting its key in a header of its own has that header dropped on a
// redirect leaving the request's host, as Authorization is: net/http
// forwards any other header to wherever a redirect leads.
func (e *egressClients) forReleased(rel *toolplane.Released) (*http.Client, error) {
	if rel == nil || rel.Connection == nil {
		return nil, fmt.Errorf("no connection was released for the call")
	}
	cfg := rel.Connection.Config
	header := ""
	if cfg.Auth == toolplane.AuthHeader {
		header = cfg.Header
	}
	return e.client(cfg.Egress, header)
}

// runtimes runs tools bound to one of the platform's runtimes (an HTTP
// request, a SQL statement: invoke.Runtimes), dispatching through the
// runtimes' contract and building each definition's binding once.
type runtimes struct {
	set   *handler.Runtimes
	bound sync.Map // the definition's identity and binding spec -> *handler.Binding
	// byRef answers the binding of a definition by the binding object
	// it holds, without encoding it: the registry's tools keep theirs
	// for as long as they stand, so every call of one tool finds its
	// binding there. A definition built afresh for a call holds new
	// objects and falls through to bound, which compares by content;
	// refs bounds byRef, which starts over past maxRefs.
	byRef sync.Map // bindingRef -> *handler.Binding
	refs  atomic.Int64
}

// newRuntimes answers the runtimes of the contracts rs.
func newRuntimes(rs ...handler.Runtime) (*runtimes, error) {
	set, err := handler.NewRuntimes(rs...)
	if err != nil {
		return nil, err
	}
	return &runtimes{set: set}, nil
}

// bindingRef names a definition's binding by its identity and the spec
// object its runtime runs. Definitions are not changed once built (the
// registry and the catalogue make a new one for every change), so the
// same object means the same spec.
type bindingRef struct {
	name, version, schemaHash string
	// What else of the definition a runtime builds its binding from: a
	// write is never retried on a lost answer and settles as a write.
	effect     toolplane.Effect
	retry      toolplane.Retry
	connection string
	spec       any
}

// maxRefs bounds runtimes.byRef.
const maxRefs = 4096

// Binding implements invoke.Runtimes.
func (r *runtimes) Binding(d *toolplane.Definition) (*handler.Binding, error) {
	rt, spec, ok := r.set.For(&d.Binding)
	if !ok || rt.Bind == nil {
		return nil, fmt.Errorf("%s is not bound to a runtime this deployment runs", d.Name)
	}
	ref := bindingRef{d.Name, d.Version, d.SchemaHash, d.Effect, d.Retry, d.Connection, spec}
	if b, ok := r.byRef.Load(ref); ok {
		return b.(*handler.Binding), nil
	}
	b, err := r.bind(rt, d)
	if err != nil {
		return nil, err
	}
	if r.refs.Add(1) > maxRefs {
		r.byRef.Clear()
		r.refs.Store(1)
	}
	r.byRef.Store(ref, b)
	return b, nil
}

// bind answers d's binding by rt, built once per definition. The key is
// the whole definition, not its name, version and binding: two
// organizations may publish one name and version with the same request,
// one a read and the other a write, and a read's binding (retried on a
// lost answer) must never run the write.
func (r *runtimes) bind(rt *handler.Runtime, d *toolplane.Definition) (*handler.Binding, error) {
	whole, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	key := string(whole)
	if b, ok := r.bound.Load(key); ok {
		return b.(*handler.Binding), nil
	}
	b, err := rt.Bind(d)
	if err != nil {
		return nil, err
	}
	v, _ := r.bound.LoadOrStore(key, b)
	return v.(*handler.Binding), nil
}

// egressDial answers how a SQL connection's pool dials its database: only
// where the connection's egress rules allow, checked after resolution.
func egressDial(c *toolplane.Connection) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	p, err := egress.Compile(c.Config.Egress)
	if err != nil {
		return nil, err
	}
	return p.Dialer(), nil
}

// stateSweepEvery is how often expired authorizations are removed.
const stateSweepEvery = 5 * time.Minute

// sweepEvery calls sweep every interval until ctx ends, logging a failed
// sweep as what failed. The rows a sweep removes are refused when read
// anyway; sweeping only keeps their tables from growing.
func sweepEvery(ctx context.Context, every time.Duration, sweep func(context.Context) (int, error), log *slog.Logger, failed string) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := sweep(ctx); err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, failed, "err", err)
			}
		}
	}
}
