// Package egress decides where a runtime may connect on behalf of a tool:
// the HTTP requests and database connections made through an
// organization's connection. A connection's toolplane.EgressRules compile
// into a Policy, and the Policy's dialer is the only way those runtimes
// reach the network.
//
// The decision is made when dialing, after name resolution, on the
// addresses actually dialed:
//
//	host name on the connection's host list?      no  -> refused
//	resolve it (once)
//	every resolved address outside the refused    no  -> refused, unless an
//	classes (loopback, private, link-local,              allow_cidrs range
//	metadata, ...)?                                      holds it
//	dial the checked address itself                      (never re-resolved)
//
// Dialing the address that was checked, rather than handing the name to a
// dialer that resolves it again, leaves no window for a DNS answer that
// changes between the check and the connection. An HTTP client of the
// Policy checks every redirect again (scheme, host list, count) and dials
// its target through the same check.
//
// A Policy compiled with AnyHost has no host list: any name passes the
// first step and the addresses decide, which is how the destinations of
// notification channels are checked.
//
// A refusal is a *RefusedError, which errors.Is reports as
// toolplane.ErrForbidden.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

// Resolver answers a host name's addresses. *net.Resolver is one; tests
// inject their own to make a name resolve where they need it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Option adjusts a Policy as Compile builds it.
type Option func(*Policy)

// WithResolver resolves host names with r instead of net.DefaultResolver.
func WithResolver(r Resolver) Option {
	return func(p *Policy) { p.resolver = r }
}

// WithDialer dials the checked addresses with d (its timeouts and
// keep-alive settings) instead of the default dialer. d's own Resolver is
// never consulted: it is only ever given IP addresses.
func WithDialer(d *net.Dialer) Option {
	return func(p *Policy) { p.dialer = d }
}

// WithSecretHeaders names more request headers that hold secrets (an API
// key header such as X-API-Key) so that a redirect to another host drops
// them, as it drops Authorization, Proxy-Authorization and Cookie.
func WithSecretHeaders(names ...string) Option {
	return func(p *Policy) {
		for _, n := range names {
			p.secretHeaders = append(p.secretHeaders, http.CanonicalHeaderKey(n))
		}
	}
}

// AnyHost admits every host name, leaving the decision to the address
// rules alone: the refused classes and the allow_cidrs ranges. It is for
// destinations that are named one by one by an administrator rather than
// listed on a connection (a notification channel's webhook or SMTP
// server), where a host list would only repeat the destination.
func AnyHost() Option {
	return func(p *Policy) { p.anyHost = true }
}

// Policy is one connection's compiled egress rules. It is safe for
// concurrent use. Its HTTP transport and connection pool are its own, so a
// connection dialed under one Policy never carries another's requests.
type Policy struct {
	names    map[string]struct{} // exact host names, lower case, no trailing dot
	suffixes []string            // ".example.com" for the pattern *.example.com
	ips      map[netip.Addr]struct{}
	allow    []netip.Prefix
	anyHost  bool

	resolver      Resolver
	dialer        *net.Dialer
	secretHeaders []string
	transport     *http.Transport
}

// maxQuoted bounds how much of a refused entry an error quotes.
const maxQuoted = 80

// maxRedirects is how many redirects one request may follow.
const maxRedirects = 5

// Compile checks r and answers its Policy. Each host is an exact DNS name
// (case does not matter, a trailing dot is ignored), a *.example.com
// pattern matching every name below example.com (not example.com itself),
// or a literal IP address. Each AllowCIDRs entry is a CIDR range or a
// single address. A malformed entry answers an error wrapping
// toolplane.ErrInvalid that names it. An empty host list compiles to a
// Policy that refuses every host.
func Compile(r toolplane.EgressRules, opts ...Option) (*Policy, error) {
	p := &Policy{
		names:         make(map[string]struct{}, len(r.Hosts)),
		ips:           make(map[netip.Addr]struct{}),
		resolver:      net.DefaultResolver,
		dialer:        &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		secretHeaders: []string{"Authorization", "Proxy-Authorization", "Cookie"},
	}
	for _, h := range r.Hosts {
		if err := p.addHost(h); err != nil {
			return nil, err
		}
	}
	for _, c := range r.AllowCIDRs {
		prefix, err := ParseRange(c)
		if err != nil {
			return nil, err
		}
		p.allow = append(p.allow, prefix)
	}
	for _, o := range opts {
		o(p)
	}
	p.transport = p.newTransport()
	return p, nil
}

// addHost adds one host list entry.
func (p *Policy) addHost(h string) error {
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return invalid("host", h, "an IP address with a zone")
		}
		p.ips[a.Unmap()] = struct{}{}
		return nil
	}
	name := normalize(h)
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		if !validName(rest) {
			return invalid("host", h, "not a *.suffix pattern over a DNS name")
		}
		p.suffixes = append(p.suffixes, "."+rest)
		return nil
	}
	if !validName(name) {
		return invalid("host", h, "not a DNS name, *.suffix pattern or IP address")
	}
	p.names[name] = struct{}{}
	return nil
}

// ParseRange reads an address range as an allow list names it: a CIDR
// prefix (10.0.0.0/8, fd00::/8) or one IP address (10.0.0.7, ::1), not
// zoned. An IPv4-mapped range is answered as the IPv4 range it is; a wider
// IPv6 range that only begins in the mapped space stays IPv6 and so
// admits no IPv4 address. Its error wraps toolplane.ErrInvalid.
func ParseRange(c string) (netip.Prefix, error) {
	prefix, err := netip.ParsePrefix(c)
	if err != nil {
		a, aerr := netip.ParseAddr(c)
		if aerr != nil {
			return netip.Prefix{}, invalid("allow_cidrs entry", c, "not a CIDR range or IP address")
		}
		if a.Zone() != "" {
			return netip.Prefix{}, invalid("allow_cidrs entry", c, "an IP address with a zone")
		}
		prefix = netip.PrefixFrom(a, a.BitLen())
	}
	prefix = prefix.Masked()
	// Masked, a range is IPv4-mapped only when it lies within
	// ::ffff:0:0/96; a wider IPv6 range (::/0) stays IPv6 and admits no
	// IPv4 address.
	if a := prefix.Addr(); a.Is4In6() {
		prefix = netip.PrefixFrom(a.Unmap(), prefix.Bits()-96)
	}
	return prefix, nil
}

// invalid answers Compile's refusal of one entry.
func invalid(what, entry, why string) error {
	return fmt.Errorf("egress: %s %s is %s: %w", what, quote(entry), why, toolplane.ErrInvalid)
}

// quote quotes s for an error message, cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) > maxQuoted {
		s = s[:maxQuoted] + "…"
	}
	return strconv.Quote(s)
}

// normalize answers a host name as the host list holds it: lower case,
// without the trailing dot of a fully qualified name.
func normalize(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// validName reports whether name is a DNS name of ASCII labels: letters,
// digits, hyphens and underscores, no label empty or longer than 63, 253
// bytes at most. An internationalized name is written in its xn-- form.
func validName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// hostListed reports whether host (a name, or an IP literal) is on the
// host list.
func (p *Policy) hostListed(host string) bool {
	if p.anyHost {
		return hostShaped(host)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return false
		}
		_, ok := p.ips[a.Unmap()]
		return ok
	}
	name := normalize(host)
	if _, ok := p.names[name]; ok {
		return true
	}
	for _, s := range p.suffixes {
		if len(name) > len(s) && strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// checkHost refuses a host that is not on the host list, and an IP
// literal whose address is refused.
func (p *Policy) checkHost(host string) error {
	if !p.hostListed(host) {
		return p.notListed(host)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.CheckAddr(host, a)
	}
	return nil
}

// CheckAddr answers a *RefusedError naming host when address a is refused:
// it falls in a refused class and no allow_cidrs range admits it. It
// answers nil for an address a dial may reach. It does not consult the
// host list.
func (p *Policy) CheckAddr(host string, a netip.Addr) error {
	v := p.verdict(a)
	if v.class == nil {
		return nil
	}
	return &RefusedError{Host: host, Addr: a.String(), Rule: v.rule()}
}

// LookupHost answers host itself, unresolved, when it is on the host list
// (and, an IP address, is not refused), and a *RefusedError otherwise. It is the lookup for a driver that
// resolves a name before calling its dial hook (pgconn.Config.LookupFunc):
// the name must reach DialContext, which resolves and checks it itself.
func (p *Policy) LookupHost(_ context.Context, host string) ([]string, error) {
	if err := p.checkHost(host); err != nil {
		return nil, err
	}
	return []string{host}, nil
}

// Dialer answers DialContext as a function value, for a driver's dial hook:
// pgconn.Config.DialFunc (with LookupHost as its LookupFunc) and the MySQL
// driver's Config.DialFunc.
func (p *Policy) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return p.DialContext
}

// DialContext connects to addr (host:port) over TCP when the policy
// allows it: the host on the host list, and every address it resolves to
// allowed. It dials the checked addresses themselves, in the resolver's
// order, until one answers. A refusal is a *RefusedError; other networks
// than TCP (a Unix socket, UDP) are refused.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var ipNetwork string
	switch network {
	case "tcp":
		ipNetwork = "ip"
	case "tcp4":
		ipNetwork = "ip4"
	case "tcp6":
		ipNetwork = "ip6"
	default:
		return nil, &RefusedError{Host: addr, Rule: "network " + quote(network) + " is not TCP"}
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %s: %w", quote(addr), toolplane.ErrInvalid)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %s: port is not a number: %w", quote(addr), toolplane.ErrInvalid)
	}
	addrs, err := p.resolve(ctx, ipNetwork, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		target := netip.AddrPortFrom(a.Unmap(), uint16(port)).String()
		conn, err := p.dialer.DialContext(ctx, network, target)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("egress: dial %s: %w", host, errors.Join(errs...))
}

// CheckName makes the decision DialContext would make for host, without
// dialing: the host on the host list, and every address it resolves to
// now allowed. It answers a *RefusedError when the policy refuses host,
// another error when host does not resolve, and nil otherwise. A dial
// later checks again, so an answer that changes meanwhile is still
// caught; this is for refusing a destination early, when it is
// configured.
func (p *Policy) CheckName(ctx context.Context, host string) error {
	_, err := p.resolve(ctx, "ip", host)
	return err
}

// resolve answers host's addresses, each checked, or the refusal of host
// or of one of its addresses: a name with one refused address among
// allowed ones is refused outright, so which address answers first never
// decides whether a call is allowed.
func (p *Policy) resolve(ctx context.Context, ipNetwork, host string) ([]netip.Addr, error) {
	if !p.hostListed(host) {
		return nil, p.notListed(host)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = p.resolver.LookupNetIP(ctx, ipNetwork, normalize(host))
		if err != nil {
			return nil, fmt.Errorf("egress: resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("egress: resolve %s: no address", host)
		}
	}
	for _, a := range addrs {
		if err := p.CheckAddr(host, a); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// ruleNotListed is the rule of a host that is not on the host list.
const ruleNotListed = "not on the connection's host list"

// ruleNotAHost is the rule, under AnyHost, of a host that is neither an
// IP address nor a DNS name.
const ruleNotAHost = "not a DNS name or an IP address"

// notListed answers the refusal of a host hostListed refused.
func (p *Policy) notListed(host string) error {
	if p.anyHost {
		return &RefusedError{Host: host, Rule: ruleNotAHost}
	}
	return &RefusedError{Host: host, Rule: ruleNotListed}
}

// hostShaped reports whether host is an IP address (without a zone) or a
// DNS name whose last label is not a number: 2130706433 or 0x7f.1 are
// other spellings of an address that some resolvers read as one, never a
// name.
func hostShaped(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Zone() == ""
	}
	name := normalize(host)
	if !validName(name) {
		return false
	}
	last := name[strings.LastIndexByte(name, '.')+1:]
	return strings.Trim(last, "0123456789") != "" && !strings.HasPrefix(last, "0x")
}

// RefusedError is a connection the policy refused: Host as the caller
// named it, Addr the address refused when the refusal was of an address,
// and Rule what refused it. errors.Is reports it as toolplane.ErrForbidden,
// also through the *url.Error an http.Client wraps it in.
type RefusedError struct {
	Host string
	Addr string
	Rule string
}

func (e *RefusedError) Error() string {
	if e.Addr == "" || e.Addr == e.Host {
		return "egress: " + e.Host + " refused: " + e.Rule
	}
	return "egress: " + e.Host + " refused at " + e.Addr + ": " + e.Rule
}

// Unwrap answers toolplane.ErrForbidden, the refusal's kind.
func (e *RefusedError) Unwrap() error { return toolplane.ErrForbidden }
