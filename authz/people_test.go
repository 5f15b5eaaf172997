package authz_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/policy"
)

// decideFor answers the policy's decision for agent calling tool on
// behalf of user (with the claims u), at the tool's default version.
func (f *fixture) decideFor(t *testing.T, agent, user string, u *toolplane.User, tool string) policy.Decision {
	t.Helper()
	tl, ok := f.reg.Get("org-1", tool)
	if !ok {
		t.Fatalf("no tool %s", tool)
	}
	in := &toolplane.Invocation{OrganizationID: "org-1", AgentID: agent, UserID: user, User: u,
		Principal: toolplane.Principal{ID: agent, Tools: []string{tool}}}
	d, err := authz.Policy{Service: f.svc}.Decide(f.ctx, policy.Input{Invocation: in, Tool: &tl.Def})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A call made for a person is allowed only when both the agent and the
// person may make it: the person by a grant of their own or of a group
// their claims place them in. An organization that grants people nothing
// refuses every delegated call, saying what to configure.
func TestDelegatedCallsNeedThePersonsGrant(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	finance := &toolplane.User{Groups: []string{"finance"}}

	// Nobody is granted anything yet, people included.
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "agent-support", Pattern: "crm.*"}, operator); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "agent-support", Pattern: "payments.get_order"}, operator); err != nil {
		t.Fatal(err)
	}
	if d := f.decideFor(t, "agent-support", "sam", nil, "crm.lookup"); d.Effect != policy.Deny || !strings.Contains(d.Reason, "grants people no tools") {
		t.Fatalf("with no person granted anything: %v %q", d.Effect, d.Reason)
	}
	if d := f.decideFor(t, "agent-support", "", nil, "crm.lookup"); d.Effect != policy.Allow {
		t.Fatalf("the agent alone: %v %q", d.Effect, d.Reason)
	}

	for _, g := range []*toolplane.Grant{
		{UserID: "sam", Pattern: "crm.lookup"},
		{Group: "finance", Pattern: "payments.*"},
		{UserID: "kim", Pattern: "payments.refund_order@^2.0.0"},
	} {
		if err := f.svc.AddGrant(f.ctx, g, operator); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, agent, user string
		u                 *toolplane.User
		tool              string
		want              policy.Effect
	}{
		{"both may", "agent-support", "sam", nil, "crm.lookup", policy.Allow},
		{"the person may not", "agent-support", "sam", nil, "payments.get_order", policy.Deny},
		{"the person's group may", "agent-support", "sam", finance, "payments.get_order", policy.Allow},
		{"a group claimed by another person", "agent-support", "lee", finance, "payments.get_order", policy.Allow},
		{"no grant and no group", "agent-support", "lee", nil, "payments.get_order", policy.Deny},
		{"the agent may not, whatever the person may", "agent-other", "sam", finance, "crm.lookup", policy.Deny},
		{"the agent may not, the group may", "agent-support", "sam", finance, "payments.refund_order", policy.Deny},
		{"the person's pin excludes the default version", "agent-billing", "kim", nil, "payments.refund_order", policy.Deny},
	}
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "agent-billing", Pattern: "payments.*"}, operator); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := f.decideFor(t, tt.agent, tt.user, tt.u, tt.tool); d.Effect != tt.want {
				t.Fatalf("decision %v (%q), want %v", d.Effect, d.Reason, tt.want)
			}
		})
	}
}

// Grants to people are changed as agents' are: by an agent_operator or a
// platform_admin, recorded in the change log under the person or group,
// and refused when they name no subject or two.
func TestPersonGrantsAreRoleCheckedAndLogged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{UserID: "sam", Pattern: "crm.*"}, auditor); !errors.Is(err, toolplane.ErrForbidden) {
		t.Fatalf("an auditor granting a person: %v, want ErrForbidden", err)
	}
	for _, g := range []*toolplane.Grant{
		{UserID: "sam", AgentID: "agent-support", Pattern: "crm.*"},
		{UserID: "sam", Group: "finance", Pattern: "crm.*"},
		{Pattern: "crm.*"},
	} {
		if err := f.svc.AddGrant(f.ctx, g, admin); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("AddGrant(agent %q, user %q, group %q) = %v, want ErrInvalid", g.AgentID, g.UserID, g.Group, err)
		}
	}
	sam := &toolplane.Grant{UserID: "sam", Pattern: "crm.*"}
	group := &toolplane.Grant{Group: "finance", Pattern: "payments.*"}
	for _, g := range []*toolplane.Grant{sam, group} {
		if err := f.svc.AddGrant(f.ctx, g, operator); err != nil {
			t.Fatal(err)
		}
	}
	// The agent may, so the person's grant alone decides: allowed while it
	// stands, refused once it is revoked.
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "agent-x", Pattern: "crm.*"}, operator); err != nil {
		t.Fatal(err)
	}
	if d := f.decideFor(t, "agent-x", "sam", nil, "crm.lookup"); d.Effect != policy.Allow {
		t.Fatalf("before the revocation: %v (%q)", d.Effect, d.Reason)
	}
	if err := f.svc.RevokeGrant(f.ctx, sam.ID, operator); err != nil {
		t.Fatal(err)
	}
	changes, _, err := f.store.ListChanges(f.ctx, "org-1", "grant.add", "", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	subjects := map[string]bool{}
	for _, c := range changes {
		subjects[c.Subject] = true
	}
	if !subjects["user:sam"] || !subjects["group:finance"] {
		t.Fatalf("change log subjects %v, want user:sam and group:finance", subjects)
	}
	if d := f.decideFor(t, "agent-x", "sam", nil, "crm.lookup"); d.Effect != policy.Deny || !strings.Contains(d.Reason, "not granted") {
		t.Fatalf("after the revocation: %v (%q)", d.Effect, d.Reason)
	}
}

// BenchmarkDelegatedDecision is the decision of a call made for a person
// whose claims place them in many groups, each granted the tool: what a
// delegated call adds to every decision.
func BenchmarkDelegatedDecision(b *testing.B) {
	f := newFixture(b)
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "agent-support", Pattern: "crm.*"}, operator); err != nil {
		b.Fatal(err)
	}
	groups := make([]string, 64)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%02d", i)
		if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{Group: groups[i], Pattern: "crm.lookup"}, operator); err != nil {
			b.Fatal(err)
		}
	}
	tl, ok := f.reg.Get("org-1", "crm.lookup")
	if !ok {
		b.Fatal("no crm.lookup")
	}
	in := policy.Input{Tool: &tl.Def, Invocation: &toolplane.Invocation{OrganizationID: "org-1", AgentID: "agent-support",
		UserID: "sam", User: &toolplane.User{Groups: groups}, Principal: toolplane.Principal{ID: "agent-support", Tools: []string{"crm.lookup"}}}}
	pol := authz.Policy{Service: f.svc}
	b.ReportAllocs()
	for b.Loop() {
		if d, err := pol.Decide(f.ctx, in); err != nil || d.Effect != policy.Allow {
			b.Fatalf("%v %q %v", d.Effect, d.Reason, err)
		}
	}
}

// BenchmarkPin is what a call's principal asks of the grants for each
// tool its key names: whether the agent is granted the tool, and at which
// range.
func BenchmarkPin(b *testing.B) {
	f := newFixture(b)
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "agent-support", Pattern: "crm.*"}, operator); err != nil {
		b.Fatal(err)
	}
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "agent-support", Pattern: "crm.lookup@^1.0.0"}, operator); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if rng, ok, err := f.svc.Pin(f.ctx, "org-1", "agent-support", "", "crm.lookup"); err != nil || !ok || rng == "" {
			b.Fatalf("Pin = %q, %v, %v", rng, ok, err)
		}
	}
}
