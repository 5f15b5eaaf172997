package egress_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// mustRefuse is an account of the refused classes written apart from the
// package's table, mostly from net/netip's own predicates: what no policy
// reaches unless an allow_cidrs entry admits it.
func mustRefuse(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() || metadata(a) {
		return true
	}
	if a.Is4() {
		b := a.As4()
		return b[0] == 0 || b[0] == 100 && b[1]&0xc0 == 64 || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	if v4, ok := carried(a); ok {
		return mustRefuse(v4)
	}
	return false
}

func metadata(a netip.Addr) bool {
	switch a.String() {
	case "169.254.169.254", "100.100.100.200", "168.63.129.16", "fd00:ec2::254":
		return true
	}
	return false
}

// carried answers the IPv4 address a NAT64 or 6to4 address carries.
func carried(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && [8]byte(b[4:12]) == [8]byte{}:
		return netip.AddrFrom4([4]byte(b[12:])), true
	case b[0] == 0x20 && b[1] == 0x02:
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// allowedBy reports whether one of the entries, read as Compile documents
// them, admits a: itself, or the IPv4 address it carries. A metadata
// address needs an entry of that single address.
func allowedBy(entries []string, a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	v4, isCarrier := carried(a)
	for _, e := range entries {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			ip, err := netip.ParseAddr(e)
			if err != nil {
				continue
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		p = p.Masked()
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		for _, x := range []netip.Addr{a, v4} {
			if x == v4 && !isCarrier {
				continue
			}
			if p.Contains(x) && (!metadata(x) && !metadata(a) || p.IsSingleIP()) {
				return true
			}
		}
	}
	return false
}

// FuzzPolicy compiles arbitrary rules and checks an arbitrary address
// and host against them. Whatever the input, nothing panics; an address
// of a refused class is admitted only when an allow_cidrs entry holds it;
// without entries it is always refused; and every listed name is
// admitted, and a listed address exactly when its address is.
func FuzzPolicy(f *testing.F) {
	seeds := []struct {
		hosts, cidrs, host string
		addr               []byte
	}{
		{"api.example.com", "", "api.example.com", []byte{127, 0, 0, 1}},
		{"*.example.com,10.0.0.1", "10.0.0.0/8", "a.example.com", []byte{10, 1, 2, 3}},
		{"a.test", "169.254.0.0/16", "A.TEST.", []byte{169, 254, 169, 254}},
		{"::1", "::/0,0.0.0.0/0", "::1", netip.MustParseAddr("::ffff:127.0.0.1").AsSlice()},
		{"x", "64:ff9b::/96", "x", netip.MustParseAddr("64:ff9b::a9fe:a9fe").AsSlice()},
		{"x", "127.0.0.1", "x", netip.MustParseAddr("2002:7f00:1::").AsSlice()},
		{"x", "::ffff:127.0.0.0/104", "x", netip.MustParseAddr("fd00:ec2::254").AsSlice()},
		{"*.,*,..,-a", "1.2.3.4/99,fe80::1%x", "", []byte{}},
	}
	for _, s := range seeds {
		f.Add(s.hosts, s.cidrs, s.host, s.addr)
	}
	f.Fuzz(func(t *testing.T, hosts, cidrs, host string, raw []byte) {
		rules := toolplane.EgressRules{Hosts: strings.Split(hosts, ","), AllowCIDRs: strings.Split(cidrs, ",")}
		p, err := egress.Compile(rules)
		if err != nil {
			if !errors.Is(err, toolplane.ErrInvalid) {
				t.Fatalf("Compile: %v, not ErrInvalid", err)
			}
			return
		}
		a, ok := netip.AddrFromSlice(raw)
		if ok {
			err := p.CheckAddr(host, a)
			if err != nil && !errors.Is(err, toolplane.ErrForbidden) {
				t.Fatalf("CheckAddr(%s): %v, not ErrForbidden", a, err)
			}
			if err == nil && mustRefuse(a) && !allowedBy(rules.AllowCIDRs, a) {
				t.Fatalf("CheckAddr admitted %s with allow_cidrs %q", a, rules.AllowCIDRs)
			}
			strict, err := egress.Compile(toolplane.EgressRules{Hosts: rules.Hosts})
			if err != nil {
				t.Fatalf("the host list compiled once and not twice: %v", err)
			}
			if mustRefuse(a) && strict.CheckAddr(host, a) == nil {
				t.Fatalf("CheckAddr admitted %s with no allow_cidrs", a)
			}
		}
		for _, h := range rules.Hosts {
			if name, ok := strings.CutPrefix(h, "*."); ok {
				h = "x." + name
			}
			_, err := p.LookupHost(context.Background(), h)
			if ip, perr := netip.ParseAddr(h); perr == nil {
				// A listed address is still checked as an address.
				if (err == nil) != (p.CheckAddr(h, ip) == nil) {
					t.Fatalf("listed address %q: LookupHost %v, CheckAddr disagrees", h, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("listed host %q refused: %v", h, err)
			}
		}
		p.LookupHost(context.Background(), host)
	})
}
