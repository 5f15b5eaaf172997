package sqlruntime

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/handler"
)

// TestEgressRefusalNamesHostAndRuleToTheOperatorOnly: a PostgreSQL or
// MariaDB connection whose egress rules refuse its database's address, or
// do not list its host, ends the call released as unavailable, telling
// the model only that the destination is not allowed, while the outcome's
// detail (the operator's log and audit) names the host and the rule.
func TestEgressRefusalNamesHostAndRuleToTheOperatorOnly(t *testing.T) {
	t.Parallel()
	rules := []struct {
		name  string
		rules toolplane.EgressRules
		want  []string // in the operator's detail
	}{
		{"loopback refused", toolplane.EgressRules{Hosts: []string{"127.0.0.1"}}, []string{"127.0.0.1", "loopback address"}},
		{"host not listed", toolplane.EgressRules{Hosts: []string{"db.example.com"}}, []string{"127.0.0.1", "not on the connection's host list"}},
	}
	for _, be := range backends {
		if be.name == "sqlite" {
			continue // a file, not a destination
		}
		for _, r := range rules {
			t.Run(be.name+"/"+r.name, func(t *testing.T) {
				t.Parallel()
				p, err := egress.Compile(r.rules)
				if err != nil {
					t.Fatal(err)
				}
				var dialed bool
				cfg := Config{Dial: func(*toolplane.Connection) (func(context.Context, string, string) (net.Conn, error), error) {
					return func(ctx context.Context, network, addr string) (net.Conn, error) {
						dialed = true
						return p.DialContext(ctx, network, addr)
					}, nil
				}}
				f := open(t, be, Config{})
				// The fixture's own runtime made the table; the call
				// goes through a runtime whose dial the rules refuse.
				f.rt = newRuntime(t, cfg)
				for _, d := range []*toolplane.Definition{
					tool(toolplane.EffectRead, `SELECT name FROM items`, 10),
					tool(toolplane.EffectWrite, `UPDATE items SET qty = 2`, 0),
				} {
					b, err := f.rt.Bind(d)
					if err != nil {
						t.Fatal(err)
					}
					_, err = f.run(b, nil, 10*time.Second)
					o := outcome(t, b, err)
					if o.Kind != handler.Release || o.Result.Error == nil || o.Result.Error.Code != toolplane.CodeUnavailable {
						t.Fatalf("%s: outcome %+v, want unavailable, released (err %v)", d.Effect, o, err)
					}
					if msg := o.Result.Error.Message; msg != handler.DestinationNotAllowed || o.Quoted {
						t.Errorf("%s: the model reads %q (quoted %t), want only that the destination is not allowed", d.Effect, msg, o.Quoted)
					}
					for _, w := range r.want {
						if !strings.Contains(o.Detail, w) {
							t.Errorf("%s: detail %q lacks %q", d.Effect, o.Detail, w)
						}
					}
				}
				if !dialed {
					t.Error("the runtime never dialed through the rules")
				}
			})
		}
	}
}
