package policy_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
)

// The Request a rule reads carries what the platform knows of the person
// a call acts for (their identity provider's roles, groups, manager and
// attributes, as the deployment maps them) and of the calling agent (its
// credential's attributes): a rule on a person's group or manager, or on
// an agent's attribute, decides on them, and a person named without
// claims reads as empty lists, never null.
func TestNewRequestCarriesThePersonAndTheAgent(t *testing.T) {
	t.Parallel()
	d := &toolplane.Definition{Name: "payments.refund_order", Version: "1.0.0", Effect: toolplane.EffectWrite}
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		user      *toolplane.User
		agent     map[string]any
		wantUser  string
		wantPrinc string
	}{
		{"claims mapped", &toolplane.User{Roles: []string{"clerk"}, Groups: []string{"contractors"}, Manager: "kim", Attributes: map[string]any{"region": "eu"}},
			map[string]any{"team": "ops"},
			`{"id":"sam","roles":["clerk"],"groups":["contractors"],"manager":"kim","attributes":{"region":"eu"}}`,
			`{"agent":"agent-1","roles":[],"attributes":{"team":"ops"}}`},
		{"named without claims", nil, nil,
			`{"id":"sam","roles":[],"groups":[],"attributes":{}}`,
			`{"agent":"agent-1","roles":[],"attributes":{}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv := invocation(d.Name)
			inv.UserID, inv.User, inv.AgentAttributes = "sam", tt.user, tt.agent
			r := policy.NewRequest(policy.Input{Invocation: inv, Tool: d, Arguments: map[string]any{}}, now, nil, 0)
			user, _ := json.Marshal(r.User)
			princ, _ := json.Marshal(r.Principal)
			if string(user) != tt.wantUser || string(princ) != tt.wantPrinc {
				t.Errorf("user = %s, principal = %s;\nwant %s, %s", user, princ, tt.wantUser, tt.wantPrinc)
			}
		})
	}
}
