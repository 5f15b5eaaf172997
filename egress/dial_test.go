package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// resolver answers names from a table, as a DNS server an attacker
// controls would: any name to any address.
type resolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr // successive answers; the last repeats
	lookups map[string]int
}

func newResolver(names map[string][]string) *resolver {
	r := &resolver{answers: map[string][][]netip.Addr{}, lookups: map[string]int{}}
	for name, addrs := range names {
		r.answer(name, addrs...)
	}
	return r
}

// answer adds the next answer for name.
func (r *resolver) answer(name string, addrs ...string) {
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[name] = append(r.answers[name], as)
}

func (r *resolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	answers, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	n := r.lookups[host]
	r.lookups[host]++
	var out []netip.Addr
	for _, a := range answers[min(n, len(answers)-1)] {
		if network == "ip" || network == "ip4" && a.Unmap().Is4() || network == "ip6" && !a.Unmap().Is4() {
			out = append(out, a)
		}
	}
	return out, nil
}

func (r *resolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// echoServer listens on 127.0.0.1 and answers each connection with its
// greeting; it counts the connections it accepted.
func echoServer(t *testing.T) (port string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			io.WriteString(c, "hello\n")
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepted
}

func greeting(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDialContext(t *testing.T) {
	t.Parallel()
	port, _ := echoServer(t)
	res := newResolver(map[string][]string{
		"good.test":     {"127.0.0.1"},
		"evil.test":     {"127.0.0.1"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"other.test":    {"127.0.0.2"},
		"mixed.test":    {"127.0.0.1", "10.0.0.1"},
		"metadata.test": {"169.254.169.254"},
		"nat64.test":    {"64:ff9b::7f00:2"},
		"nothing.test":  {},
	})
	allowed, err := egress.Compile(toolplane.EgressRules{
		Hosts:      []string{"good.test", "mapped.test", "other.test", "mixed.test", "metadata.test", "nat64.test", "nothing.test", "missing.test", "127.0.0.1", "127.0.0.2"},
		AllowCIDRs: []string{"127.0.0.1/32", "169.254.0.0/16"},
	}, egress.WithResolver(res))
	if err != nil {
		t.Fatal(err)
	}
	strict, err := egress.Compile(toolplane.EgressRules{Hosts: []string{"evil.test", "127.0.0.1", "localhost"}}, egress.WithResolver(res))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		policy  *egress.Policy
		network string
		host    string
		refused string // what the refusal must say; "" when the dial succeeds
	}{
		{"a listed name resolving to an allowed address", allowed, "tcp", "good.test", ""},
		{"the name in upper case", allowed, "tcp", "GOOD.test", ""},
		{"a fully qualified name", allowed, "tcp4", "good.test.", ""},
		{"an IPv4-mapped answer, dialed as IPv4", allowed, "tcp4", "mapped.test", ""},
		{"a listed, allowed IP literal", allowed, "tcp", "127.0.0.1", ""},
		{"a name not listed", allowed, "tcp", "evil.test", "not on the connection's host list"},
		{"a name resolving to loopback, not allowed", strict, "tcp", "evil.test", "loopback address 127.0.0.1"},
		{"a listed loopback literal, not allowed", strict, "tcp", "127.0.0.1", "loopback address 127.0.0.1"},
		{"a loopback literal not listed", allowed, "tcp", "127.0.0.3", "not on the connection's host list"},
		{"another loopback address than the one allowed", allowed, "tcp", "other.test", "loopback address 127.0.0.2"},
		{"one refused address among allowed ones", allowed, "tcp", "mixed.test", "private address 10.0.0.1"},
		{"metadata inside an allowed link-local range", allowed, "tcp", "metadata.test", "cloud metadata address 169.254.169.254"},
		{"a NAT64 carrier of a refused loopback address", allowed, "tcp6", "nat64.test", "carrying loopback address 127.0.0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := tt.policy.DialContext(context.Background(), tt.network, net.JoinHostPort(tt.host, port))
			if tt.refused == "" {
				if err != nil {
					t.Fatalf("DialContext = %v", err)
				}
				if g := greeting(t, c); g != "hello\n" {
					t.Fatalf("greeting %q", g)
				}
				return
			}
			var refused *egress.RefusedError
			if !errors.As(err, &refused) || !errors.Is(err, toolplane.ErrForbidden) {
				t.Fatalf("DialContext = %v, %v; want refused", c, err)
			}
			if refused.Host != tt.host || !strings.Contains(err.Error(), tt.refused) || !strings.Contains(err.Error(), tt.host) {
				t.Errorf("refusal %q (%+v); want host %s and %q", err, refused, tt.host, tt.refused)
			}
		})
	}

	for _, tt := range []struct{ network, addr string }{
		{"unix", "/run/postgresql/.s.PGSQL.5432"},
		{"unix", "good.test:" + port},
		{"udp", "good.test:" + port},
	} {
		_, err := allowed.DialContext(context.Background(), tt.network, tt.addr)
		var refused *egress.RefusedError
		if !errors.As(err, &refused) || refused.Host != tt.addr || !strings.Contains(err.Error(), "is not TCP") {
			t.Errorf("dial %s %s = %v; want refused", tt.network, tt.addr, err)
		}
	}
	for _, host := range []string{"missing.test", "nothing.test"} {
		_, err := allowed.DialContext(context.Background(), "tcp", net.JoinHostPort(host, port))
		if err == nil || errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("dial %s = %v; want a resolution error, not a refusal", host, err)
		}
	}
	for _, addr := range []string{"good.test", "good.test:http", "good.test:65536", "[good.test:80"} {
		if _, err := allowed.DialContext(context.Background(), "tcp", addr); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("dial %q = %v; want ErrInvalid", addr, err)
		}
	}
}

// TestDialResolvesOnce: the address checked is the address dialed, from
// one answer. A name whose next answer points elsewhere (DNS rebinding)
// cannot slip a refused address between the check and the connection.
func TestDialResolvesOnce(t *testing.T) {
	t.Parallel()
	port, _ := echoServer(t)
	res := newResolver(nil)
	res.answer("rebind.test", "127.0.0.1")
	res.answer("rebind.test", "127.0.0.2")
	p, err := egress.Compile(toolplane.EgressRules{Hosts: []string{"rebind.test"}, AllowCIDRs: []string{"127.0.0.1/32"}}, egress.WithResolver(res))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.DialContext(context.Background(), "tcp", net.JoinHostPort("rebind.test", port))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RemoteAddr().String(); got != net.JoinHostPort("127.0.0.1", port) {
		t.Errorf("dialed %s; want the address checked", got)
	}
	greeting(t, c)
	if n := res.count("rebind.test"); n != 1 {
		t.Errorf("%d lookups for one dial; want 1", n)
	}
	_, err = p.DialContext(context.Background(), "tcp", net.JoinHostPort("rebind.test", port))
	var refused *egress.RefusedError
	if !errors.As(err, &refused) || refused.Addr != "127.0.0.2" {
		t.Errorf("second dial = %v; want refused at 127.0.0.2", err)
	}
}

// TestDialLocalhost uses the system resolver: localhost is loopback
// whatever it resolves to, and refused until allowed.
func TestDialLocalhost(t *testing.T) {
	t.Parallel()
	port, _ := echoServer(t)
	rules := toolplane.EgressRules{Hosts: []string{"localhost"}}
	strict, err := egress.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	_, err = strict.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port))
	var refused *egress.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Rule, "loopback address") {
		t.Fatalf("dial localhost = %v; want refused as loopback", err)
	}
	rules.AllowCIDRs = []string{"127.0.0.0/8", "::1/128"}
	open, err := egress.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	c, err := open.DialContext(context.Background(), "tcp4", net.JoinHostPort("localhost", port))
	if err != nil {
		t.Fatalf("dial localhost allowed: %v", err)
	}
	if g := greeting(t, c); g != "hello\n" {
		t.Errorf("greeting %q", g)
	}
}
