package rules_test

import (
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/rego"
	"github.com/toolplane/toolplane/rules"
)

// TestTheExampleBundlesRouteTheInjectedRefund is seed exercise 5 through
// the service, on both real engines: the shipped example bundle is
// published (its own tests pass), and a support agent told by a ticket to
// refund $5,000 to another account is routed to finance, by the rule over
// $500, never allowed; a small refund to the order's own account is
// allowed by the support rule.
func TestTheExampleBundlesRouteTheInjectedRefund(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"cedar", "rego"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.svc = rules.New(rules.Config{Store: f.store, Grants: authz.Policy{Service: f.grants},
				Engines: []policy.Engine{cedar.Engine{}, rego.Engine{}}, Now: f.clock.Now})
			files, err := policy.ReadBundleDir("../examples/policy/" + lang)
			if err != nil {
				t.Fatal(err)
			}
			b := f.publish(t, files, rules.PublishOptions{Note: "the example"})
			if b.Language != lang {
				t.Fatalf("published language %q", b.Language)
			}
			refund := func(amount, account string) policy.Decision {
				t.Helper()
				in := input("agent-1", "demo.refund_order", map[string]any{
					"order_id": "ord-7", "amount_cents": json.Number(amount), "to_account": account})
				in.Invocation.UserID = ""
				in.Invocation.Credential = &toolplane.Credential{ID: "tpk_agent", OrganizationID: org, Kind: toolplane.CredentialAgent,
					Subject: "agent-1"}
				in.Invocation.AgentAttributes = map[string]any{"department": "support"}
				in.Facts = map[string]any{"order_account": "acct-customer"}
				d, err := f.svc.Decide(t.Context(), in)
				if err != nil {
					t.Fatalf("Decide = %v", err)
				}
				return d
			}
			d := refund("500000", "acct-attacker")
			if d.Effect != policy.RequireApproval || d.Rule != "refund-over-500" || d.Approval == nil || d.Approval.Group != "finance" || d.Bundle != 1 {
				t.Errorf("the injected refund = %s rule %q route %+v bundle %d (%s); want finance's approval by refund-over-500",
					d.Effect, d.Rule, d.Approval, d.Bundle, d.Reason)
			}
			if d := refund("1200", "acct-customer"); d.Effect != policy.Allow {
				t.Errorf("a small refund to the order's account = %s rule %q (%s); want allow", d.Effect, d.Rule, d.Reason)
			}
		})
	}
}
