// Package ratelimit keeps per-caller request limits on one node: a fixed
// window per key, which is what the X-RateLimit-Limit, -Remaining and
// -Reset headers describe. Limits are local by design: a node never waits
// on another to admit a request, so N nodes admit up to N times a key's
// limit.
//
// Two budgets are kept apart: a credential's requests (Limiter, spent only
// by requests that authenticated as it) and failed authentications
// (Failures, spent by wrong keys and tokens, per client address). Nobody
// who lacks a key's secret can spend its holder's budget, and failures
// sent from one address never hold back a key presented from another.
package ratelimit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane/egress"
)

// Limiter admits up to Limit requests per key per Window.
type Limiter struct {
	Limit  int
	Window time.Duration
	mu     sync.Mutex
	counts map[string]*window
	swept  time.Time
}

type window struct {
	start time.Time
	n     int
	// repeats counts the requests of the window moved to its retry
	// budget (see Repeated).
	repeats int
}

// Decision is the answer for one request.
type Decision struct {
	Allowed   bool
	Limit     int
	Remaining int
	// Reset is when the current window ends.
	Reset time.Time
}

// New answers a limiter of limit requests per window.
func New(limit int, per time.Duration) *Limiter {
	return &Limiter{Limit: limit, Window: per, counts: map[string]*window{}}
}

// Allow counts a request of key at now.
func (l *Limiter) Allow(key string, now time.Time) Decision {
	return l.take(key, now, true)
}

// Peek answers what Allow would answer for key at now without counting a
// request: Allowed reports whether the budget has room for one more.
func (l *Limiter) Peek(key string, now time.Time) Decision {
	return l.take(key, now, false)
}

// Repeated moves one request key made in the window of now from its budget
// to its retry budget, of the same size, and reports whether it did: the
// request turned out to repeat a call already answered (see
// apikey.Gate.Repeated), so a client retrying after a crash spends its
// retry budget rather than the budget its new work needs. Once the retry
// budget is spent, a repeat costs what any request costs; so a loop of
// retries is still bounded, at twice the limit.
func (l *Limiter) Repeated(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.counts[key]
	if !ok || now.Sub(w.start) >= l.Window || w.n == 0 || w.repeats >= l.Limit {
		// A window that ended took its count with it: nothing to move.
		return false
	}
	w.n--
	w.repeats++
	return true
}

func (l *Limiter) take(key string, now time.Time, count bool) Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > l.Window { // forget windows that ended
		for k, w := range l.counts {
			if now.Sub(w.start) >= l.Window {
				delete(l.counts, k)
			}
		}
		l.swept = now
	}
	w, ok := l.counts[key]
	if !count && (!ok || now.Sub(w.start) >= l.Window) {
		// An unseen key has its whole budget; nothing is stored for it.
		start := now.Truncate(l.Window)
		if now.Sub(start) >= l.Window {
			start = now
		}
		return Decision{Allowed: l.Limit > 0, Limit: l.Limit, Remaining: l.Limit, Reset: start.Add(l.Window)}
	}
	if !ok || now.Sub(w.start) >= l.Window {
		w = &window{start: now.Truncate(l.Window)}
		if now.Sub(w.start) >= l.Window {
			w.start = now
		}
		l.counts[key] = w
	}
	d := Decision{Limit: l.Limit, Reset: w.start.Add(l.Window)}
	if w.n >= l.Limit {
		return d
	}
	if !count {
		d.Allowed, d.Remaining = true, l.Limit-w.n
		return d
	}
	w.n++
	d.Allowed, d.Remaining = true, l.Limit-w.n
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
	byAddr *Limiter
	// tried marks, per address and key id, the ids that failed from the
	// address in the window (a count of them, on the same windows).
	tried *Limiter
}

// NewFailures answers a failure budget of limit failed authentications per
// window for each client address.
func NewFailures(limit int, per time.Duration) *Failures {
	return &Failures{byAddr: New(limit, per), tried: New(limit, per)}
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
	da := f.byAddr.Peek(addr, now)
	if da.Allowed {
		return da, false
	}
	if dt := f.tried.Peek(pair(addr, id), now); dt.Remaining == dt.Limit {
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
	da := f.byAddr.Allow(addr, now)
	if id != "" {
		f.tried.Allow(pair(addr, id), now)
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

// Header describes d in the X-RateLimit headers (and, when the request is
// refused, Retry-After), the same way on every door.
func (d Decision) Header(h http.Header, now time.Time) {
	h.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(d.Reset.Unix(), 10))
	if !d.Allowed {
		h.Set("Retry-After", strconv.Itoa(max(1, int(d.Reset.Sub(now).Seconds()+0.999))))
	}
}
