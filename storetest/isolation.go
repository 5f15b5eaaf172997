package storetest

import (
	"errors"
	"testing"

	"github.com/toolplane/toolplane"
)

// Invariant 6: every organization's data is filtered by organization at the
// store. Each case writes for org A and then, as org B, tries every read and
// every conditional write on the same identities.
var isolationCases = []suiteCase{
	{"Claims", testIsolationClaims},
	{"Approvals", testIsolationApprovals},
	{"Usage", testIsolationUsage},
	{"Audit", testIsolationAudit},
}

func testIsolationClaims(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	a := fullClaim(orgA, "payments.refund_order", "k", base)
	insertClaim(t, s, a)

	if c, err := s.GetClaim(ctx, orgB, a.Tool, a.Key); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetClaim as B = %+v, %v; want ErrNotFound", c, err)
	}
	if rows, next, err := s.ListClaims(ctx, orgB, a.Status, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
		t.Errorf("ListClaims as B = %d rows, %q, %v; want none", len(rows), next, err)
	}

	asB := *a
	asB.OrganizationID = orgB
	asB.Status, asB.Owner = toolplane.ClaimCompleted, "intruder"
	if ok, err := s.UpdateClaim(ctx, &asB); !refused(ok, err) {
		t.Errorf("UpdateClaim as B = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	if ok, err := s.DeleteClaim(ctx, orgB, a.Tool, a.Key, a.Version); !refused(ok, err) {
		t.Errorf("DeleteClaim as B = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	wantClaim(t, s, a)

	// B's claim on the same key is B's own: it neither collides with A's
	// nor shows through A's reads.
	b := fullClaim(orgB, a.Tool, a.Key, at(1))
	b.Owner = "worker-b"
	insertClaim(t, s, b)
	wantClaim(t, s, a)
	wantClaim(t, s, b)
	for _, org := range []struct {
		name string
		id   string
		want *toolplane.Claim
	}{{"A", orgA, a}, {"B", orgB, b}} {
		rows, _, err := s.ListClaims(ctx, org.id, a.Status, "", maxLimit)
		if err != nil || len(rows) != 1 {
			t.Fatalf("ListClaims as %s = %d rows, %v; want its one claim", org.name, len(rows), err)
		}
		if d := diff(rows[0], *org.want); d != "" {
			t.Errorf("ListClaims as %s: %s", org.name, d)
		}
	}
}

func testIsolationApprovals(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	a := fullApproval(orgA, "apr-1", "run-1", "k", base)
	insertApproval(t, s, a)

	if got, err := s.GetApproval(ctx, orgB, a.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetApproval as B = %+v, %v; want ErrNotFound", got, err)
	}
	if rows, err := s.FindApprovals(ctx, orgB, a.RunID, a.Key); err != nil || len(rows) != 0 {
		t.Errorf("FindApprovals as B = %d rows, %v; want none", len(rows), err)
	}
	if rows, next, err := s.ListApprovals(ctx, orgB, a.Status, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
		t.Errorf("ListApprovals as B = %d rows, %q, %v; want none", len(rows), next, err)
	}

	asB := *a
	asB.OrganizationID = orgB
	asB.Status, asB.ResolvedBy = toolplane.ApprovalApproved, "intruder"
	if ok, err := s.UpdateApproval(ctx, &asB); !refused(ok, err) {
		t.Errorf("UpdateApproval as B = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	wantApproval(t, s, a)

	// The same ID in B is B's own row.
	b := fullApproval(orgB, a.ID, a.RunID, a.Key, at(1))
	b.Preview = "B's preview"
	insertApproval(t, s, b)
	wantApproval(t, s, a)
	wantApproval(t, s, b)
	for _, org := range []struct {
		name string
		id   string
		want *toolplane.Approval
	}{{"A", orgA, a}, {"B", orgB, b}} {
		found, err := s.FindApprovals(ctx, org.id, a.RunID, a.Key)
		if err != nil || len(found) != 1 {
			t.Fatalf("FindApprovals as %s = %d rows, %v; want its one approval", org.name, len(found), err)
		}
		if d := diff(found[0], *org.want); d != "" {
			t.Errorf("FindApprovals as %s: %s", org.name, d)
		}
		listed, _, err := s.ListApprovals(ctx, org.id, a.Status, "", maxLimit)
		if err != nil || len(listed) != 1 {
			t.Fatalf("ListApprovals as %s = %d rows, %v; want its one approval", org.name, len(listed), err)
		}
		if d := diff(listed[0], *org.want); d != "" {
			t.Errorf("ListApprovals as %s: %s", org.name, d)
		}
	}
}

func testIsolationUsage(t *testing.T, s toolplane.Store) {
	orgA, orgB := newOrg(), newOrg()
	insertUsage(t, s, usage(orgA, "u1", "root-1", 500))
	wantCost(t, s, orgB, "root-1", 0)

	// The same ID and root in B is B's own spend.
	insertUsage(t, s, usage(orgB, "u1", "root-1", 7))
	wantCost(t, s, orgA, "root-1", 500)
	wantCost(t, s, orgB, "root-1", 7)
}

func testIsolationAudit(t *testing.T, s toolplane.Store) {
	orgA, orgB := newOrg(), newOrg()
	a := fullEvent(orgA, "ev-1", base)
	appendAudit(t, s, a)

	filters := []toolplane.AuditFilter{
		{},
		{RunID: a.RunID},
		{AgentID: a.AgentID},
		{Tool: a.Tool},
		{Outcome: a.Outcome},
		{RunID: a.RunID, AgentID: a.AgentID, Tool: a.Tool, Outcome: a.Outcome},
	}
	for _, f := range filters {
		if rows, next, err := s.ListAudit(t.Context(), orgB, f, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
			t.Errorf("ListAudit(%+v) as B = %d rows, %q, %v; want none", f, len(rows), next, err)
		}
	}

	b := fullEvent(orgB, a.ID, at(1))
	b.Outcome = "denied"
	appendAudit(t, s, b)
	wantEvents(t, listAudit(t, s, orgA, toolplane.AuditFilter{}, maxLimit), []toolplane.AuditEvent{*a})
	wantEvents(t, listAudit(t, s, orgB, toolplane.AuditFilter{}, maxLimit), []toolplane.AuditEvent{*b})
}
