package egress_test

import (
	"errors"
	"net"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// TestAnyHostDecidesByAddressAlone: a policy admitting any host name still
// refuses every name or literal whose addresses are refused, checks a name
// again at every dial (a rebinding answer is refused), and lets an
// allow_cidrs range admit an internal destination.
func TestAnyHostDecidesByAddressAlone(t *testing.T) {
	t.Parallel()
	r := newResolver(map[string][]string{
		"hooks.example.com": {"93.184.215.14"},
		"internal.example":  {"10.1.2.3"},
		"mixed.example":     {"93.184.215.14", "127.0.0.1"},
		"metadata.example":  {"169.254.169.254"},
	})
	p, err := egress.Compile(toolplane.EgressRules{}, egress.AnyHost(), egress.WithResolver(r))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host    string
		refused bool
	}{
		{"hooks.example.com", false},
		{"internal.example", true},
		{"mixed.example", true},
		{"metadata.example", true},
		{"127.0.0.1", true},
		{"::ffff:127.0.0.1", true},
		{"169.254.169.254", true},
		{"[::1]", true}, // not an address: refused as a name that does not resolve
		{"2130706433", true},
		{"0x7f.1", true},
		{"127.1", true},
		{"hooks.example.com:443", true},
		{"93.184.215.14", false},
	}
	for _, c := range cases {
		err := p.CheckName(t.Context(), c.host)
		var re *egress.RefusedError
		switch {
		case c.refused && err == nil:
			t.Errorf("CheckName(%s) = nil, want a refusal", c.host)
		case !c.refused && err != nil:
			t.Errorf("CheckName(%s) = %v, want nil", c.host, err)
		case errors.As(err, &re) && !errors.Is(err, toolplane.ErrForbidden):
			t.Errorf("CheckName(%s): a refusal that is not ErrForbidden: %v", c.host, err)
		}
	}
	for _, numeric := range []string{"2130706433", "0x7f.1", "127.1", "0177.0.0.1"} {
		var re *egress.RefusedError
		if err := p.CheckName(t.Context(), numeric); !errors.As(err, &re) {
			t.Errorf("CheckName(%s) = %v, want a refusal of the spelling, whatever a resolver makes of it", numeric, err)
		}
	}
	if err := p.CheckName(t.Context(), "nowhere.example"); err == nil || errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("a name that does not resolve: %v, want a resolution error that is not a refusal", err)
	}

	// The name checked public at configuration resolves to loopback when
	// dialed: the dial checks the new answer and refuses it.
	port, accepted := echoServer(t)
	r.answer("hooks.example.com", "127.0.0.1")
	_, err = p.DialContext(t.Context(), "tcp", net.JoinHostPort("hooks.example.com", port))
	var re *egress.RefusedError
	if !errors.As(err, &re) || re.Addr != "127.0.0.1" {
		t.Errorf("dial after rebinding: %v, want a refusal at 127.0.0.1", err)
	}
	if accepted.Load() != 0 {
		t.Error("the rebound name was dialed")
	}

	// The operator's range admits the internal receiver, and only it.
	allowed, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: []string{"127.0.0.0/8"}}, egress.AnyHost(), egress.WithResolver(r))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := allowed.DialContext(t.Context(), "tcp", net.JoinHostPort("hooks.example.com", port))
	if err != nil {
		t.Fatalf("dial within the allowed range: %v", err)
	}
	conn.Close()
	if err := allowed.CheckName(t.Context(), "internal.example"); err == nil {
		t.Error("a private address outside the allowed range was admitted")
	}
}
