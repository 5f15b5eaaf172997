package egress_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// TestRefusedClasses checks every refused class: the address is refused
// by default with a rule naming its class, and admitted once allow_cidrs
// holds it.
func TestRefusedClasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr  string
		class string // what the rule must say
		allow string // an allow_cidrs entry that admits it
	}{
		{"127.0.0.1", "loopback address 127.0.0.1", "127.0.0.0/8"},
		{"127.255.0.9", "loopback address", "127.0.0.0/8"},
		{"::1", "loopback address ::1", "::1/128"},
		{"10.1.2.3", "private address", "10.0.0.0/8"},
		{"172.16.0.1", "private address", "172.16.0.0/12"},
		{"172.31.255.255", "private address", "172.16.0.0/12"},
		{"192.168.1.1", "private address", "192.168.0.0/16"},
		{"fd12:3456::1", "private address", "fc00::/7"},
		{"fc00::1", "private address", "fc00::/7"},
		{"169.254.1.1", "link-local address", "169.254.0.0/16"},
		{"fe80::1", "link-local address", "fe80::/10"},
		{"fe80::1%eth0", "link-local address", "fe80::/10"},
		{"fec0::1", "site-local address", "fec0::/10"},
		{"0.0.0.0", "unspecified address", "0.0.0.0/32"},
		{"::", "unspecified address", "::/128"},
		{"0.1.2.3", "this-network address", "0.0.0.0/8"},
		{"224.0.0.1", "multicast address", "224.0.0.0/4"},
		{"239.255.255.250", "multicast address", "224.0.0.0/4"},
		{"ff02::1", "multicast address", "ff00::/8"},
		{"255.255.255.255", "broadcast address", "255.255.255.255/32"},
		{"240.0.0.1", "reserved address", "240.0.0.0/4"},
		{"100.64.0.1", "carrier-grade NAT address", "100.64.0.0/10"},
		{"100.127.255.254", "carrier-grade NAT address", "100.64.0.0/10"},
		{"198.18.0.1", "benchmarking address", "198.18.0.0/15"},
		{"169.254.169.254", "cloud metadata address 169.254.169.254", "169.254.169.254/32"},
		{"fd00:ec2::254", "cloud metadata address", "fd00:ec2::254"},
		{"100.100.100.200", "cloud metadata address", "100.100.100.200"},
		{"168.63.129.16", "cloud metadata address", "168.63.129.16/32"},
		// IPv4-mapped addresses are unmapped first, and an IPv4 range
		// admits them.
		{"::ffff:127.0.0.1", "loopback address 127.0.0.1", "127.0.0.1/32"},
		{"::ffff:169.254.169.254", "cloud metadata address 169.254.169.254", "169.254.169.254/32"},
		{"::ffff:10.0.0.1", "private address 10.0.0.1", "::ffff:10.0.0.0/104"},
		// Carriers of a refused IPv4 address, admitted by a range of
		// either the carrier or what it carries.
		{"64:ff9b::7f00:1", "NAT64 address 64:ff9b::7f00:1 carrying loopback address 127.0.0.1", "127.0.0.1/32"},
		{"64:ff9b::a9fe:a9fe", "carrying cloud metadata address 169.254.169.254", "169.254.169.254/32"},
		{"64:ff9b::c0a8:1", "carrying private address 192.168.0.1", "64:ff9b::/96"},
		{"2002:7f00:1::", "6to4 address 2002:7f00:1:: carrying loopback address 127.0.0.1", "127.0.0.0/8"},
		{"2002:a9fe:a9fe:1:2:3:4:5", "carrying cloud metadata address", "169.254.169.254"},
		{"2002:a00:1::1", "carrying private address 10.0.0.1", "2002::/16"},
		{"::7f00:1", "IPv4-compatible address ::7f00:1 carrying loopback address 127.0.0.1", "127.0.0.1"},
		{"::ffff:0:a00:1", "IPv4-translated address", "10.0.0.1"},
		{"64:ff9b:1::1", "local-use NAT64 address", "64:ff9b:1::/48"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo address", "2001::/32"},
	}
	refuseAll, err := egress.Compile(toolplane.EgressRules{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			a := netip.MustParseAddr(tt.addr)
			err := refuseAll.CheckAddr("tool.example", a)
			var refused *egress.RefusedError
			if !errors.As(err, &refused) || !errors.Is(err, toolplane.ErrForbidden) {
				t.Fatalf("CheckAddr = %v; want refused", err)
			}
			if refused.Host != "tool.example" || refused.Addr != tt.addr || !strings.Contains(refused.Rule, tt.class) {
				t.Errorf("refusal %+v; want host tool.example, address %s, a rule naming %q", refused, tt.addr, tt.class)
			}
			for _, want := range []string{"tool.example", tt.addr, tt.class} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not name %q", err, want)
				}
			}
			p, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: []string{"192.0.2.0/24", tt.allow}})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.CheckAddr("tool.example", a); err != nil {
				t.Errorf("allowing %s: %v", tt.allow, err)
			}
		})
	}
}

// TestMetadataNeedsItsOwnEntry: a range allowed for a network (a database
// on a private or link-local address, everything) never opens the cloud
// metadata address inside it; only an entry of that address does.
func TestMetadataNeedsItsOwnEntry(t *testing.T) {
	t.Parallel()
	p, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: []string{"169.254.0.0/16", "0.0.0.0/0", "::/0", "fd00::/8", "64:ff9b::/96"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"169.254.169.254", "100.100.100.200", "168.63.129.16", "fd00:ec2::254", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::"} {
		if err := p.CheckAddr("metadata.example", netip.MustParseAddr(addr)); !errors.Is(err, toolplane.ErrForbidden) || !strings.Contains(err.Error(), "cloud metadata address") {
			t.Errorf("CheckAddr(%s) = %v; want refused as cloud metadata", addr, err)
		}
	}
	for _, addr := range []string{"169.254.170.2", "10.0.0.1", "127.0.0.1", "fd00:ec2::253", "64:ff9b::a00:1"} {
		if err := p.CheckAddr("net.example", netip.MustParseAddr(addr)); err != nil {
			t.Errorf("CheckAddr(%s) = %v; want admitted by its range", addr, err)
		}
	}
}

func TestPublicAddressesAreAllowed(t *testing.T) {
	t.Parallel()
	p, err := egress.Compile(toolplane.EgressRules{})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "172.15.255.255", "172.32.0.0", "100.63.255.255", "100.128.0.0",
		"169.253.255.255", "11.0.0.1", "198.20.0.1", "223.255.255.255", "168.63.129.17",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8",
		"64:ff9b::808:808", "2002:808:808::1", "::808:808",
	} {
		if err := p.CheckAddr("public.example", netip.MustParseAddr(addr)); err != nil {
			t.Errorf("CheckAddr(%s) = %v; want allowed", addr, err)
		}
	}
}

// TestAllowedRangeIsNoWiderThanWritten: allowing one loopback address
// leaves the rest of the class refused.
func TestAllowedRangeIsNoWiderThanWritten(t *testing.T) {
	t.Parallel()
	p, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: []string{"127.0.0.1/32", "10.1.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.2", "::1", "10.2.0.1", "192.168.0.1", "64:ff9b::7f00:2"} {
		if err := p.CheckAddr("h.example", netip.MustParseAddr(addr)); !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("CheckAddr(%s) = %v; want refused", addr, err)
		}
	}
	// Every IPv6 address is no IPv4 address: IPv4-mapped addresses are
	// checked unmapped, as IPv4.
	v6, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: []string{"::/0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.1", "::ffff:127.0.0.1", "10.0.0.1"} {
		if err := v6.CheckAddr("h.example", netip.MustParseAddr(addr)); !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("::/0 allowed: CheckAddr(%s) = %v; want refused", addr, err)
		}
	}
	if err := v6.CheckAddr("h.example", netip.MustParseAddr("::1")); err != nil {
		t.Errorf("::/0 allowed: CheckAddr(::1) = %v", err)
	}
}
