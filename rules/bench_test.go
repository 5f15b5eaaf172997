package rules_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/rules"
)

// BenchmarkDecide measures one decision of a refund on a node whose
// caches are warm: the grants alone (no bundle published), the grants and
// the example Cedar bundle, and the same with the run's cost read from
// the store on every decision (as serve wires it); beside them the grants'
// policy alone, what serve decided with before.
func BenchmarkDecide(b *testing.B) {
	files, err := policy.ReadBundleDir("../examples/policy/cedar")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		publish bool
		runCost bool
		stage1  bool
	}{
		{"authz-policy-alone", false, false, true},
		{"grants-only", false, false, false},
		{"cedar-example", true, false, false},
		{"cedar-example+run-cost", true, true, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := newFixture(b)
			cfg := rules.Config{Store: f.store, Grants: authz.Policy{Service: f.grants},
				Engines: []policy.Engine{cedar.Engine{}}, Now: f.clock.Now, Budget: time.Second}
			if c.runCost {
				cfg.RunCost = f.store.RunTreeCost
			}
			f.svc = rules.New(cfg)
			if c.publish {
				if _, err := f.svc.Publish(b.Context(), files, rules.PublishOptions{}, admin); err != nil {
					b.Fatal(err)
				}
			}
			in := input("agent-1", "demo.refund_order", map[string]any{"order_id": "ord-7", "amount_cents": json.Number("1200"), "to_account": "acct-customer"})
			in.Invocation.UserID = ""
			in.Invocation.Credential = &toolplane.Credential{ID: "tpk_agent", OrganizationID: org, Kind: toolplane.CredentialAgent, Subject: "agent-1"}
			in.Invocation.AgentAttributes = map[string]any{"department": "support"}
			in.Facts = map[string]any{"order_account": "acct-customer"}
			if _, err := f.svc.Decide(b.Context(), in); err != nil {
				b.Fatal(err)
			}
			var p policy.Policy = f.svc
			if c.stage1 {
				p = authz.Policy{Service: f.grants}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Decide(b.Context(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
