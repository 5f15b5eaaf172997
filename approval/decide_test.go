package approval_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
)

// secretPreview is a preview quoting a credential, as a tool's template
// may when the arguments carry one.
const secretPreview = "Charge the card with key sk_live_0123456789abcdefghijkl"

// A preview is stored as it is shown, its credentials redacted, so no read
// of the store (a listing, an export, a backup) finds them; Shown redacts
// one stored before that rule too.
func TestPreviewIsStoredAndShownRedacted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := proposal(t)
	a.Preview = secretPreview
	f.file(t, a)
	stored := f.get(t, a.ID)
	if strings.Contains(stored.Preview, "sk_live") || !strings.Contains(stored.Preview, "Charge the card") {
		t.Fatalf("stored preview = %q; want it redacted", stored.Preview)
	}
	old := *stored
	old.Preview = secretPreview
	if got := approval.Shown(old).Preview; strings.Contains(got, "sk_live") || !strings.Contains(got, "Charge the card") {
		t.Fatalf("Shown preview = %q; want it redacted", got)
	}
}

// Mismatch tells every way another run's approval differs from the call
// asking, the tenant among them: a person approved the effect on one
// tenant's data, and the same arguments on another's are another effect.
func TestMismatchNamesEachDifference(t *testing.T) {
	t.Parallel()
	a := proposal(t)
	a.ID = "apr_1"
	a.Invocation = []byte(`{"OrganizationID":"org-1","AgentID":"agent-1","UserID":"user-1","TenantID":"t-1"}`)
	same := func() *toolplane.Invocation {
		return &toolplane.Invocation{OrganizationID: "org-1", AgentID: "agent-1", UserID: "user-1", TenantID: "t-1",
			Principal: toolplane.Principal{ID: "agent-1"}}
	}
	if why := approval.Mismatch(a, same(), a.Tool, a.ArgumentsHash); why != "" {
		t.Fatalf("the same call: %q, want no mismatch", why)
	}
	tests := []struct {
		name   string
		change func(inv *toolplane.Invocation)
		tool   string
		hash   string
		want   string
	}{
		{"another organization", func(inv *toolplane.Invocation) { inv.OrganizationID = "org-2" }, a.Tool, a.ArgumentsHash, "does not exist"},
		{"another agent", func(inv *toolplane.Invocation) { inv.AgentID = "agent-2" }, a.Tool, a.ArgumentsHash, "another agent"},
		{"another principal", func(inv *toolplane.Invocation) { inv.Principal.ID = "agent-2" }, a.Tool, a.ArgumentsHash, "another agent"},
		{"another person", func(inv *toolplane.Invocation) { inv.UserID = "user-2" }, a.Tool, a.ArgumentsHash, "another person"},
		{"another tenant", func(inv *toolplane.Invocation) { inv.TenantID = "t-2" }, a.Tool, a.ArgumentsHash, "another tenant"},
		{"no tenant", func(inv *toolplane.Invocation) { inv.TenantID = "" }, a.Tool, a.ArgumentsHash, "another tenant"},
		{"another tool", func(*toolplane.Invocation) {}, "email.delete", a.ArgumentsHash, "another tool"},
		{"other arguments", func(*toolplane.Invocation) {}, a.Tool, "sha256:other", "other arguments"},
	}
	for _, tt := range tests {
		inv := same()
		tt.change(inv)
		if why := approval.Mismatch(a, inv, tt.tool, tt.hash); !strings.Contains(why, tt.want) {
			t.Errorf("%s: Mismatch = %q, want it to say %q", tt.name, why, tt.want)
		}
	}
}

// An approval a rule gave to several people stays pending until that many
// distinct people approved it: each approval before the last is recorded
// and leaves it pending, and only the last one approves it.
func TestResolveWaitsForEveryApprover(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	carol := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "carol", Roles: []string{toolplane.RoleApprover}}
	a := proposal(t)
	a.Approvers = 3
	f.file(t, a)
	ctx := context.Background()
	for i, who := range []*toolplane.Credential{as("alice"), as("bob")} {
		got, err := f.svc.Resolve(ctx, a.ID, approval.Decision{Approve: true}, who, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"alice", "bob"}[:i+1]
		if stored := f.get(t, a.ID); got.Status != toolplane.ApprovalPending || stored.Status != toolplane.ApprovalPending ||
			!slices.Equal(stored.ApprovedBy, want) || stored.ResolvedBy != "" {
			t.Fatalf("after %s's approval: %+v; want pending, approved by %v", who.Subject, stored, want)
		}
	}
	got, err := f.svc.Resolve(ctx, a.ID, approval.Decision{Approve: true}, carol, nil)
	if err != nil || got.Status != toolplane.ApprovalApproved || got.ResolvedBy != "carol" {
		t.Fatalf("the third approval = %+v, %v; want approved by carol", got, err)
	}
}

// The next group an approval escalates to judges afresh: the approvals
// given at the level that expired, and a person a rule named to answer
// it, do not carry over.
func TestEscalationStartsTheNextGroupAfresh(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := proposal(t)
	a.DefaultOnTimeout, a.Approvers, a.ApprovedBy, a.Approver = toolplane.OnTimeoutEscalate, 2, []string{"alice"}, "bob"
	f.file(t, a)
	f.clock.Advance(ttl + time.Minute)
	next, err := f.svc.Escalate(context.Background(), a, "directors", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []*toolplane.Approval{next, f.get(t, next.ID)} {
		if len(got.ApprovedBy) != 0 || got.Approver != "" || got.Approvers != 2 || got.ApproverGroup != "directors" {
			t.Fatalf("successor = %+v; want two directors to approve it afresh, no one named", got)
		}
	}
	if _, err := f.svc.Resolve(context.Background(), next.ID, approval.Decision{Approve: true}, as("alice"), nil); !errors.Is(err, approval.ErrNotAuthorized) {
		t.Fatalf("alice, not a director, answered the successor: %v", err)
	}
}
