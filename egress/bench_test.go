package egress_test

import (
	"net/netip"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// BenchmarkCheckAddr measures the check every dialed address takes: a
// public address passes every refused class; a private one is admitted by
// the last of several allow_cidrs entries; a refused one builds its error.
func BenchmarkCheckAddr(b *testing.B) {
	p, err := egress.Compile(toolplane.EgressRules{
		Hosts:      []string{"api.example.com"},
		AllowCIDRs: []string{"192.0.2.0/24", "2001:db8::/32", "172.20.0.0/16", "10.20.0.0/16"},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, bb := range []struct {
		name    string
		addr    string
		refused bool
	}{
		{"public IPv4", "93.184.216.34", false},
		{"public IPv6", "2606:4700:4700::1111", false},
		{"IPv4-mapped public", "::ffff:93.184.216.34", false},
		{"private allowed", "10.20.1.2", false},
		{"NAT64 public", "64:ff9b::808:808", false},
		{"loopback refused", "127.0.0.1", true},
	} {
		a := netip.MustParseAddr(bb.addr)
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := p.CheckAddr("api.example.com", a); (err != nil) != bb.refused {
					b.Fatal(err)
				}
			}
		})
	}
}
