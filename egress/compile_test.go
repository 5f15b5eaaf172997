package egress_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

func TestCompileRefusesMalformedEntries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rules toolplane.EgressRules
		entry string // the entry the error must name; "" when it compiles
	}{
		{"names, patterns and addresses", toolplane.EgressRules{
			Hosts:      []string{"api.example.com", "API.Example.ORG.", "*.svc.example.net", "203.0.113.7", "2001:db8::1", "_dmarc.example.com", "xn--bcher-kva.example"},
			AllowCIDRs: []string{"10.0.0.0/8", "127.0.0.1", "::1/128", "fd00::/8", "::ffff:127.0.0.0/104"},
		}, ""},
		{"no rules at all", toolplane.EgressRules{}, ""},
		{"an address with a port", toolplane.EgressRules{Hosts: []string{"api.example.com:443"}}, "api.example.com:443"},
		{"a URL", toolplane.EgressRules{Hosts: []string{"https://api.example.com"}}, "https://api.example.com"},
		{"an empty host", toolplane.EgressRules{Hosts: []string{""}}, `""`},
		{"a bare star", toolplane.EgressRules{Hosts: []string{"*"}}, `"*"`},
		{"a star alone before a dot", toolplane.EgressRules{Hosts: []string{"*."}}, `"*."`},
		{"a star inside a name", toolplane.EgressRules{Hosts: []string{"api.*.example.com"}}, "api.*.example.com"},
		{"a star not a whole label", toolplane.EgressRules{Hosts: []string{"*api.example.com"}}, "*api.example.com"},
		{"an empty label", toolplane.EgressRules{Hosts: []string{"api..example.com"}}, "api..example.com"},
		{"a label starting with a hyphen", toolplane.EgressRules{Hosts: []string{"-api.example.com"}}, "-api.example.com"},
		{"a label of 64 bytes", toolplane.EgressRules{Hosts: []string{strings.Repeat("a", 64) + ".example.com"}}, "aaaa"},
		{"a non-ASCII name", toolplane.EgressRules{Hosts: []string{"bücher.example"}}, "bücher.example"},
		{"a space", toolplane.EgressRules{Hosts: []string{"api example.com"}}, "api example.com"},
		{"an address with a zone", toolplane.EgressRules{Hosts: []string{"fe80::1%eth0"}}, "fe80::1%eth0"},
		{"a CIDR that is a name", toolplane.EgressRules{Hosts: []string{"a.example"}, AllowCIDRs: []string{"localhost"}}, "localhost"},
		{"a CIDR past its bits", toolplane.EgressRules{AllowCIDRs: []string{"10.0.0.0/33"}}, "10.0.0.0/33"},
		{"a CIDR with a zone", toolplane.EgressRules{AllowCIDRs: []string{"fe80::1%eth0"}}, "fe80::1%eth0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := egress.Compile(tt.rules)
			if tt.entry == "" {
				if err != nil || p == nil {
					t.Fatalf("Compile = %v, %v; want a policy", p, err)
				}
				return
			}
			if !errors.Is(err, toolplane.ErrInvalid) {
				t.Fatalf("Compile = %v, %v; want ErrInvalid", p, err)
			}
			if !strings.Contains(err.Error(), tt.entry) {
				t.Errorf("error %q does not name the entry %q", err, tt.entry)
			}
		})
	}
}

func TestCompileQuotesALongEntryShort(t *testing.T) {
	t.Parallel()
	_, err := egress.Compile(toolplane.EgressRules{Hosts: []string{strings.Repeat("x/", 10000)}})
	if !errors.Is(err, toolplane.ErrInvalid) || len(err.Error()) > 200 {
		t.Fatalf("Compile = %v (%d bytes); want a short ErrInvalid", err, len(err.Error()))
	}
}

// TestHostList checks which host names a policy admits, through
// LookupHost, the check a driver's lookup hook runs before dialing.
func TestHostList(t *testing.T) {
	t.Parallel()
	p, err := egress.Compile(toolplane.EgressRules{Hosts: []string{
		"api.example.com", "Mixed.Example.ORG.", "*.svc.example.net", "203.0.113.7", "2001:db8::1",
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host string
		ok   bool
	}{
		{"api.example.com", true},
		{"API.EXAMPLE.COM", true},
		{"api.example.com.", true},
		{"mixed.example.org", true},
		{"MIXED.example.org.", true},
		{"example.com", false},
		{"www.api.example.com", false},
		{"api.example.com.evil.test", false},
		{"evilapi.example.com", false},
		{"a.svc.example.net", true},
		{"a.b.svc.example.net", true},
		{"A.SVC.Example.Net.", true},
		{"svc.example.net", false},
		{"evilsvc.example.net", false},
		{".svc.example.net", false},
		{"203.0.113.7", true},
		{"::ffff:203.0.113.7", true},
		{"203.0.113.8", false},
		{"2001:db8::1", true},
		{"2001:DB8:0::1", true},
		{"2001:db8::1%eth0", false},
		{"", false},
	}
	for _, tt := range tests {
		addrs, err := p.LookupHost(context.Background(), tt.host)
		if !tt.ok {
			var refused *egress.RefusedError
			if !errors.As(err, &refused) || !errors.Is(err, toolplane.ErrForbidden) || refused.Host != tt.host {
				t.Errorf("LookupHost(%q) = %v, %v; want refused", tt.host, addrs, err)
			}
			continue
		}
		if err != nil || len(addrs) != 1 || addrs[0] != tt.host {
			t.Errorf("LookupHost(%q) = %v, %v; want the host itself", tt.host, addrs, err)
		}
	}
}

func TestEmptyHostListRefusesEveryHost(t *testing.T) {
	t.Parallel()
	p, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: []string{"0.0.0.0/0", "::/0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"api.example.com", "localhost", "8.8.8.8", "127.0.0.1", "::1"} {
		var refused *egress.RefusedError
		if _, err := p.LookupHost(context.Background(), host); !errors.As(err, &refused) {
			t.Errorf("LookupHost(%q) = %v; want refused", host, err)
		}
		if _, err := p.DialContext(context.Background(), "tcp", net.JoinHostPort(host, "443")); !errors.As(err, &refused) {
			t.Errorf("DialContext(%q) = %v; want refused", host, err)
		}
	}
}
