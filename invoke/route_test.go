package invoke_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
)

// routing decides as an organization's rules do: the grants first, then
// a rule (bundle 3) that sends every call to the route given.
type routing struct {
	route *policy.Approval
}

func (r routing) Decide(ctx context.Context, in policy.Input) (policy.Decision, error) {
	d, err := policy.Grants{}.Decide(ctx, in)
	if err != nil || d.Effect == policy.Deny {
		return d, err
	}
	return policy.Decision{Effect: policy.RequireApproval, Reason: "big refunds need finance", Rule: "big-refunds", Bundle: 3,
		Approval: r.route, Input: `{"grants":"allow","request":{"tool":{"name":"` + in.Tool.Name + `"}}}`}, nil
}

func approver(subject string, groups ...string) *toolplane.Credential {
	c := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: subject, Roles: []string{toolplane.RoleApprover}}
	for _, g := range groups {
		c.Roles = append(c.Roles, toolplane.GroupRolePrefix+g)
	}
	return c
}

// TestARuleRoutesTheApprovalItAsks: the rule that asked, its group and
// its count of distinct approvers reach the approval filed, and are
// enforced when it is answered: outside the group refused, one approval
// of two leaves it pending and runs nothing, the same person twice
// refused, the requester refused, the second distinct approver runs the
// call once. The audit event records the decision, bundle, rule and the
// document the rules read.
func TestARuleRoutesTheApprovalItAsks(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	e := newEnvWith(t, store, func(c *invoke.Config) { c.Policy = routing{route: &policy.Approval{Group: "finance", Approvers: 2}} },
		tool{def: gated("payments.refund"), fn: ok(map[string]any{"id": "r1"})})
	ctx := context.Background()
	in := inv("payments.refund")
	in.UserID = "user-sam"
	ar := must(t).Approval(e.iv.Invoke(ctx, "payments.refund", args("to", "ord_1"), in))

	a, err := store.GetApproval(ctx, "org-1", ar.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Rule != "big-refunds" || a.ApproverGroup != "finance" || a.Approvers != 2 {
		t.Fatalf("approval filed = rule %q group %q approvers %d; want big-refunds, finance, 2", a.Rule, a.ApproverGroup, a.Approvers)
	}
	events, _, err := store.ListAudit(ctx, "org-1", toolplane.AuditFilter{Tool: "payments.refund"}, "", 10)
	if err != nil || len(events) != 1 {
		t.Fatalf("audit = %d events, %v", len(events), err)
	}
	if ev := events[0]; ev.PolicyDecision != "require_approval" || ev.PolicyBundle != 3 || ev.PolicyRule != "big-refunds" || len(ev.PolicyInput) == 0 {
		t.Errorf("audit event = decision %q bundle %d rule %q input %s", ev.PolicyDecision, ev.PolicyBundle, ev.PolicyRule, ev.PolicyInput)
	}

	yes := approval.Decision{Approve: true, Reason: "checked"}
	for _, c := range []struct {
		name string
		by   *toolplane.Credential
	}{
		{"outside the group", approver("alice")},
		{"the requesting user", approver("user-sam", "finance")},
		{"the requesting agent", approver("agent-1", "finance")},
	} {
		if _, err := e.iv.Resolve(ctx, ar.ID, yes, c.by); !errors.Is(err, approval.ErrNotAuthorized) {
			t.Errorf("%s approved: %v; want ErrNotAuthorized", c.name, err)
		}
	}
	first, err := e.iv.Resolve(ctx, ar.ID, yes, approver("bob", "finance"))
	if err != nil || first.Status != toolplane.ApprovalPending || len(first.ApprovedBy) != 1 {
		t.Fatalf("first of two approvals = %+v, %v; want pending, approved by bob", first, err)
	}
	r, err := e.iv.ExecuteApproved(ctx, "org-1", ar.ID)
	if err == nil && r.OK {
		t.Fatalf("one approval of two ran the call: %+v", r)
	}
	if _, err := e.iv.Resolve(ctx, ar.ID, yes, approver("bob", "finance")); !errors.Is(err, approval.ErrNotAuthorized) {
		t.Errorf("bob approving twice: %v; want ErrNotAuthorized", err)
	}
	if e.count("payments.refund") != 0 {
		t.Fatal("the call ran before two people approved")
	}
	done, err := e.iv.Resolve(ctx, ar.ID, yes, approver("carol", "finance"))
	if err != nil || done.Status != toolplane.ApprovalApproved || done.ResolvedBy != "carol" || len(done.ApprovedBy) != 2 {
		t.Fatalf("second approval = %+v, %v; want approved by bob and carol", done, err)
	}
	must(t).OK(e.iv.ExecuteApproved(ctx, "org-1", ar.ID))
	must(t).OK(e.iv.ExecuteApproved(ctx, "org-1", ar.ID))
	if e.count("payments.refund") != 1 {
		t.Fatalf("runs = %d; want 1", e.count("payments.refund"))
	}
}

// TestARuleNamingAPersonLetsOnlyThemAnswer: a manager route resolved to a
// person lets that person answer and no one else, even in the group.
func TestARuleNamingAPersonLetsOnlyThemAnswer(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	e := newEnvWith(t, store, func(c *invoke.Config) {
		c.Policy = routing{route: &policy.Approval{Manager: true, Person: "mia"}}
	}, tool{def: gated("payments.refund"), fn: ok(map[string]any{"id": "r1"})})
	ctx := context.Background()
	ar := must(t).Approval(e.iv.Invoke(ctx, "payments.refund", args("to", "ord_1"), inv("payments.refund")))
	if _, err := e.iv.Resolve(ctx, ar.ID, approval.Decision{Approve: true}, approverAlice); !errors.Is(err, approval.ErrNotAuthorized) {
		t.Errorf("someone other than the manager approved: %v", err)
	}
	a, err := e.iv.Resolve(ctx, ar.ID, approval.Decision{Approve: true}, approver("mia"))
	if err != nil || a.Status != toolplane.ApprovalApproved {
		t.Fatalf("the manager's approval = %+v, %v", a, err)
	}
}

// TestARuleCannotMoveTheToolsApproval: a tool whose approval chain names
// a group keeps it. A rule routing the approval to another group is
// denied (nothing filed, nothing run), since either group alone would
// skip the people one of them requires; a rule naming the tool's own
// group, or adding approvers, files as usual.
func TestARuleCannotMoveTheToolsApproval(t *testing.T) {
	t.Parallel()
	chained := func(name string) toolplane.Definition {
		d := gated(name)
		d.Approval = &toolplane.ApprovalPolicy{Chain: []string{"support"}}
		return d
	}
	for _, tc := range []struct {
		name      string
		route     *policy.Approval
		wantGroup string // "" wants a denial
	}{
		{"another group", &policy.Approval{Group: "finance"}, ""},
		{"another group, more people", &policy.Approval{Group: "finance", Approvers: 2}, ""},
		{"the tool's group", &policy.Approval{Group: "support", Approvers: 2}, "support"},
		{"more people only", &policy.Approval{Approvers: 2}, "support"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			e := newEnvWith(t, store, func(c *invoke.Config) { c.Policy = routing{route: tc.route} },
				tool{def: chained("payments.refund"), fn: ok(map[string]any{"id": "r1"})})
			ctx := context.Background()
			r, err := e.iv.Invoke(ctx, "payments.refund", args("to", "ord_1"), inv("payments.refund"))
			if tc.wantGroup == "" {
				if err != nil || r.OK || r.Error == nil || r.Error.Code != toolplane.CodeDenied {
					t.Fatalf("result = %+v, %v; want denied", r, err)
				}
				if as, _, err := store.ListApprovals(ctx, "org-1", toolplane.ApprovalPending, "", 10); err != nil || len(as) != 0 {
					t.Fatalf("approvals filed = %d, %v; want none", len(as), err)
				}
				if e.count("payments.refund") != 0 {
					t.Fatal("a denied call ran")
				}
				return
			}
			ar := must(t).Approval(r, err)
			a, err := store.GetApproval(ctx, "org-1", ar.ID)
			if err != nil || a.ApproverGroup != tc.wantGroup || a.Approvers != tc.route.Approvers {
				t.Fatalf("approval = %+v, %v; want group %s, %d approvers", a, err, tc.wantGroup, tc.route.Approvers)
			}
		})
	}
}
