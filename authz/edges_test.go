package authz_test

import (
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/policy"
)

// The organization's grants, denies and bundles are read by an
// agent_operator, an auditor or a platform_admin; by no one else, and never
// with an agent's key.
func TestReadsAreAnOperatorsAnAuditorsOrAnAdmins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	agentKey := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot", Roles: []string{"auditor"}}
	reads := map[string]func(by *toolplane.Credential) error{
		"grants":  func(by *toolplane.Credential) error { _, err := f.svc.Grants(f.ctx, "", true, by); return err },
		"denies":  func(by *toolplane.Credential) error { _, err := f.svc.Denies(f.ctx, by); return err },
		"bundles": func(by *toolplane.Credential) error { _, err := f.svc.Bundles(f.ctx, by); return err },
	}
	for what, read := range reads {
		for _, by := range []*toolplane.Credential{operator, auditor, admin} {
			if err := read(by); err != nil {
				t.Errorf("%s read by %s: %v", what, by.Subject, err)
			}
		}
		for _, by := range []*toolplane.Credential{person("approver", "approver"), agentKey} {
			if err := read(by); !errors.Is(err, toolplane.ErrForbidden) {
				t.Errorf("%s read by %s: %v, want forbidden", what, by.Subject, err)
			}
		}
	}
}

// Of two grants allowing a tool, the one pinned to a range wins over the
// unpinned one, whichever was granted first: a pin narrows what the agent
// calls, and an older wildcard grant does not widen it again.
func TestAPinnedGrantWinsOverAnUnpinnedOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, pattern := range []string{"payments.*", "payments.refund_order@^2.1.0"} {
		if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: pattern}, operator); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
	}
	rng, ok, err := f.svc.Pin(f.ctx, "org-1", "bot", "", "payments.refund_order")
	if err != nil || !ok || rng != "^2.1.0" {
		t.Fatalf("Pin = %q, %v, %v; want the pinned grant's ^2.1.0", rng, ok, err)
	}
	if got := f.decide(t, "bot", "", "payments.refund_order"); got != policy.Deny {
		t.Fatalf("the default 3.0.0, outside the pin: %v, want deny", got)
	}
	if rng, ok, _ := f.svc.Pin(f.ctx, "org-1", "bot", "", "payments.get_order"); !ok || rng != "" {
		t.Fatalf("a tool only the wildcard allows: %q, %v; want allowed, unpinned", rng, ok)
	}
}

// A grant allows until its expiry, not at it.
func TestAGrantEndsAtItsExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "temp", Pattern: "crm.lookup", ExpiresAt: f.clock.Now().Add(time.Hour)}, operator); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Hour - time.Nanosecond)
	if got := f.decide(t, "temp", "", "crm.lookup"); got != policy.Allow {
		t.Fatalf("just before expiry: %v, want allow", got)
	}
	f.clock.Advance(time.Nanosecond)
	if got := f.decide(t, "temp", "", "crm.lookup"); got != policy.Deny {
		t.Fatalf("at expiry: %v, want deny", got)
	}
}

// A deny overrides every grant, so it always says why: one without a
// reason, or with only blanks, is refused.
func TestADenySaysWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, reason := range []string{"", "  \t"} {
		if err := f.svc.AddDeny(f.ctx, &toolplane.Deny{AgentID: "*", Pattern: "crm.*", Reason: reason}, admin); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("a deny with reason %q: %v, want invalid", reason, err)
		}
	}
	if ds, err := f.svc.Denies(f.ctx, admin); err != nil || len(ds) != 0 {
		t.Fatalf("denies stored = %+v, %v; want none", ds, err)
	}
}

// A decision from the last view read is made only while that view is no
// older than the age allowed: past it, the node knows too little to decide.
func TestDecideLastKnownHonoursItsAge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.lookup"}, operator); err != nil {
		t.Fatal(err)
	}
	tl, _ := f.reg.Get("org-1", "crm.lookup")
	in := policy.Input{Tool: &tl.Def, Invocation: &toolplane.Invocation{OrganizationID: "org-1", AgentID: "bot",
		Principal: toolplane.Principal{ID: "bot", Tools: []string{"crm.lookup"}}}}
	p := authz.Policy{Service: f.svc}
	if _, err := p.DecideLastKnown(in, time.Minute); !errors.Is(err, authz.ErrNoLastKnown) {
		t.Fatalf("before any view was read: %v, want ErrNoLastKnown", err)
	}
	if got := f.decide(t, "bot", "", "crm.lookup"); got != policy.Allow {
		t.Fatalf("decide = %v", got)
	}
	f.clock.Advance(time.Minute)
	if d, err := p.DecideLastKnown(in, time.Minute); err != nil || d.Effect != policy.Allow {
		t.Fatalf("a view as old as allowed: %+v, %v; want allow", d, err)
	}
	f.clock.Advance(time.Second)
	if _, err := p.DecideLastKnown(in, time.Minute); !errors.Is(err, authz.ErrNoLastKnown) {
		t.Fatalf("a view older than allowed: %v, want ErrNoLastKnown", err)
	}
}
