package ratelimit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane/egress"
)

// fixed counts requests per key in fixed windows, on this node: what
// Failures keeps. A failed authentication is a node's own business (each
// node caps the Argon2id work a flood costs it), and a fixed window
// remembers each failure for the rest of its window, which Blocked needs.
type fixed struct {
	limit  int
	window time.Duration
	mu     sync.Mutex
	counts map[string]*count
	swept  time.Time
}

type count struct {
	start time.Time
	n     int
}

func newFixed(limit int, per time.Duration) *fixed {
	return &fixed{limit: limit, window: per, counts: map[string]*count{}}
}

// take answers the decision for key at now, counting a request when add
// is set.
func (l *fixed) take(key string, now time.Time, add bool) Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > l.window { // forget windows that ended
		for k, w := range l.counts {
			if now.Sub(w.start) >= l.window {
				delete(l.counts, k)
			}
		}
		l.swept = now
	}
	w, ok := l.counts[key]
	if !ok || now.Sub(w.start) >= l.window {
		start := now.Truncate(l.window)
		if now.Sub(start) >= l.window {
			start = now
		}
		w = &count{start: start}
		if add {
			l.counts[key] = w
		}
	}
	d := Decision{Limit: l.limit, Reset: w.start.Add(l.window)}
	if w.n >= l.limit {
		return d
	}
	if add {
		w.n++
	}
	d.Allowed, d.Remaining = true, l.limit-w.n
	return d
}

// Failures limits failed authentications, on a budget of their own per
// client address, up to the limit per window. It never counts a request
// that authenticated, so failures only ever refuse further failures'
// checks, never a credential that proves itself.
//
// Failures are counted by address, not by key id. A key's secret is long
// and random: no budget of guesses per key id makes guessing it any less
// hopeless, and one only lent itself to locking out the key's holder, who
// shared the id's budget with whoever sent wrong secrets under it from
// anywhere. What an address over its budget loses:
//
//   - Its further failures are answered with a refusal to retry later
//     rather than a plain "not valid".
//   - An API key it presents under a key id that already failed from it in
//     the window is refused before its secret is checked (see Blocked).
//     That is what caps the Argon2id work of a flood from one address: its
//     budget of verifications, and then one per live key id it names.
//     Every other token is checked, because refusing it unchecked would
//     let anyone sharing the address (a NAT) lock out its other holders: a
//     JWT (cheap to verify), a malformed key (refused without the store),
//     an API key of another id (one store read, and one Argon2id run).
//
// So the one credential a flood can hold back is a key not recognised by
// the key cache, presented from the flooding address itself under the id
// the flood named; behind a reverse proxy, that address is the client's
// only when the proxy is trusted (see Proxies).
type Failures struct {
	byAddr *fixed
	// tried marks, per address and key id, the ids that failed from the
	// address in the window (a count of them, on the same windows).
	tried *fixed
}

// NewFailures answers a failure budget of limit failed authentications per
// window for each client address.
func NewFailures(limit int, per time.Duration) *Failures {
	return &Failures{byAddr: newFixed(limit, per), tried: newFixed(limit, per)}
}

// pair is the key of an address and a key id in Failures.tried; no client
// address holds a NUL.
func pair(addr, id string) string { return addr + "\x00" + id }

// Blocked reports whether an API key with key id id, presented from the
// client address addr, is to be refused at now without being checked: the
// address has spent its failure budget, and the id already failed from it
// in the window. A token without a key id (id "": a JWT, a malformed key)
// is never blocked, since checking it costs no Argon2id run. The decision
// says when the caller may try again.
func (f *Failures) Blocked(addr, id string, now time.Time) (Decision, bool) {
	if id == "" {
		return Decision{}, false
	}
	da := f.byAddr.take(addr, now, false)
	if da.Allowed {
		return da, false
	}
	if dt := f.tried.take(pair(addr, id), now, false); dt.Remaining == dt.Limit {
		return da, false // this id never failed from here: check it
	}
	return da, true
}

// Fail counts one failed authentication from addr, presenting the key id
// id ("" when the token names none, as a JWT or a malformed key), and
// answers whether the address is still within its budget: when Allowed is
// false the caller is told to slow down rather than that its credential
// is not valid.
func (f *Failures) Fail(addr, id string, now time.Time) Decision {
	da := f.byAddr.take(addr, now, true)
	if id != "" {
		f.tried.take(pair(addr, id), now, true)
	}
	return da
}

// Proxies are the reverse proxies a node believes about who their clients
// are: a request whose connection comes from one of them is counted under
// the address its X-Forwarded-For names. The zero value, and a nil
// *Proxies, trust none.
type Proxies struct {
	nets []netip.Prefix
}

// ErrProxy refuses an entry of a trusted-proxy list that is neither an IP
// address nor a CIDR prefix.
var ErrProxy = errors.New("a trusted proxy is an IP address or a CIDR prefix (10.0.0.0/8, fd00::/8)")

// ParseProxies answers the proxies list names, each entry an IP address
// (10.0.0.7, ::1) or a CIDR prefix (10.0.0.0/8, fd00::/8).
func ParseProxies(list []string) (*Proxies, error) {
	p := &Proxies{}
	for _, e := range list {
		// Read as egress reads its allowed ranges, so a range written in
		// the IPv4-mapped space is never wider than it says.
		pre, err := egress.ParseRange(strings.TrimSpace(e))
		if err != nil {
			return nil, fmt.Errorf("%w, not %q", ErrProxy, e)
		}
		p.nets = append(p.nets, pre)
	}
	return p, nil
}

// trusts reports whether a is one of p's proxies.
func (p *Proxies) trusts(a netip.Addr) bool {
	if p == nil {
		return false
	}
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// TrustsPeer reports whether r's connection comes from one of p's
// proxies: whose forwarded headers (the client's address, its client
// certificate) count.
func (p *Proxies) TrustsPeer(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	return err == nil && p.trusts(a)
}

// ClientAddr answers the address a request's failure budget is kept under.
// It starts from the peer address of the request's connection
// (RemoteAddr): a client that reaches the node directly is counted there,
// whatever headers it writes, or a flooder could pick a fresh address per
// request. Only when that peer is one of p's proxies is X-Forwarded-For
// read, from its right end, where each proxy appends the address it was
// reached from: the rightmost address that is not a trusted proxy is the
// client. What lies left of it was written by the client or by proxies
// nobody vouches for, and is never read. A chain made only of trusted
// proxies answers its leftmost address; an entry that is not an address
// answers the last trusted hop, as if the header ended there. An IPv6
// address counts as its /64, the block one subscriber is usually given.
//
// Behind a proxy that is not trusted every client shares the proxy's
// address, and so one failure budget.
func (p *Proxies) ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if p.trusts(a) {
		a = p.forwardedFor(r.Header.Values("X-Forwarded-For"), a)
	}
	return budgetAddr(a)
}

// forwardedFor walks the X-Forwarded-For values from the right, starting
// at the trusted peer, and answers the client's address.
func (p *Proxies) forwardedFor(values []string, peer netip.Addr) netip.Addr {
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		hops := strings.Split(values[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			hop := strings.TrimSpace(hops[j])
			if hop == "" {
				continue
			}
			a, err := netip.ParseAddr(hop)
			if err != nil {
				if ap, perr := netip.ParseAddrPort(hop); perr == nil {
					a, err = ap.Addr(), nil
				}
			}
			if err != nil {
				return client
			}
			client = a
			if !p.trusts(a) {
				return client
			}
		}
	}
	return client
}

// budgetAddr answers the text a's budget is kept under: the address,
// unmapped from IPv6, and an IPv6 address's /64.
func budgetAddr(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.String()
		}
	}
	return a.String()
}

// ClientAddr answers the address a request's failure budget is kept under
// when no proxy is trusted: the peer address of its connection, never a
// header a client can write (see Proxies.ClientAddr).
func ClientAddr(r *http.Request) string {
	return (*Proxies)(nil).ClientAddr(r)
}
