package policy_test

import (
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
)

// TestNewRequestCarriesWhoCalls: what the door learnt of the agent and of
// the person it acts for (a token's claims, a person's groups) reaches the
// document rules read; a call made for nobody has no user.
func TestNewRequestCarriesWhoCalls(t *testing.T) {
	t.Parallel()
	def := &toolplane.Definition{Name: "payments.refund_order", Version: "1.0.0", Effect: toolplane.EffectWrite,
		Tags: []string{"pii"}, Classification: "confidential"}
	now := time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC)
	zone := time.FixedZone("office", 2*3600)
	tests := []struct {
		name string
		inv  toolplane.Invocation
		want func(t *testing.T, r *policy.Request)
	}{
		{"agent alone", toolplane.Invocation{AgentID: "support-bot", AgentAttributes: map[string]any{"tier": "gold", "team": "oncall"}},
			func(t *testing.T, r *policy.Request) {
				if r.User != nil {
					t.Errorf("user = %+v, want none", r.User)
				}
				if r.Principal.Attributes["tier"] != "gold" || r.Principal.Team != "oncall" {
					t.Errorf("principal = %+v, want tier gold and team oncall", r.Principal)
				}
			}},
		{"for a person the token describes", toolplane.Invocation{AgentID: "support-bot", UserID: "sam",
			User: &toolplane.User{Roles: []string{"support"}, Groups: []string{"emea"}, Manager: "kim", Attributes: map[string]any{"clearance": "pii"}}},
			func(t *testing.T, r *policy.Request) {
				u := r.User
				if u == nil || u.ID != "sam" || u.Manager != "kim" || len(u.Roles) != 1 || u.Groups[0] != "emea" || u.Attributes["clearance"] != "pii" {
					t.Errorf("user = %+v", u)
				}
			}},
		{"for a person nothing is known of", toolplane.Invocation{AgentID: "support-bot", UserID: "sam"},
			func(t *testing.T, r *policy.Request) {
				u := r.User
				if u == nil || u.ID != "sam" || u.Roles == nil || u.Groups == nil || u.Attributes == nil {
					t.Errorf("user = %+v, want sam with empty lists, never null", u)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := policy.NewRequest(policy.Input{Invocation: &tt.inv, Tool: def, Arguments: map[string]any{"amount_cents": 500}}, now, zone, 42)
			if r.Context.Hour != 0 || r.Context.RunCostCents != 42 || r.Tool.Classification != "confidential" {
				t.Errorf("context = %+v, tool = %+v", r.Context, r.Tool)
			}
			tt.want(t, r)
		})
	}
}
