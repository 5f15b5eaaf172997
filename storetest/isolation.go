package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// Invariant 6: every organization's data is filtered by organization at the
// store. Each case writes for org A and then, as org B, tries every read and
// every conditional write on the same identities.
//
// AuthzRevision and CatalogRevision have no case: they may grow on another
// organization's change, which costs a reload and leaks nothing.
// ListEveryToolVersion, the deployment's own read, is the catalogue's one
// method across organizations (see Catalog/ListEvery).
var isolationCases = []suiteCase{
	{"Claims", testIsolationClaims},
	{"Approvals", testIsolationApprovals},
	{"Usage", testIsolationUsage},
	{"Audit", testIsolationAudit},
	{"Grants", testIsolationGrants},
	{"Denies", testIsolationDenies},
	{"Bundles", testIsolationBundles},
	{"Changes", testIsolationChanges},
	{"Catalog", testIsolationCatalog},
	{"Sessions", testIsolationSessions},
	{"BrowserSessions", testIsolationBrowserSessions},
	{"Connections", testIsolationConnections},
	{"OAuthStates", testIsolationOAuthStates},
	{"PolicyBundles", testIsolationPolicyBundles},
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
	if d, ok := s.(toolplane.ClaimDispatcher); ok {
		mark := *a
		mark.OrganizationID = orgB
		mark.Dispatched, mark.Attempts = true, a.Attempts+1
		if ok, err := d.DispatchClaim(ctx, &mark); !refused(ok, err) {
			t.Errorf("DispatchClaim as B = %v, %v; want false and nil or ErrNotFound", ok, err)
		}
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
	if rows, err := s.FindApprovals(ctx, orgB, a.Tool, a.Key); err != nil || len(rows) != 0 {
		t.Errorf("FindApprovals as B = %d rows, %v; want none", len(rows), err)
	}
	if rows, next, err := s.ListApprovals(ctx, orgB, a.Status, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
		t.Errorf("ListApprovals as B = %d rows, %q, %v; want none", len(rows), next, err)
	}
	for _, groups := range [][]string{nil, {a.ApproverGroup}} {
		if rows, next, err := s.ListApprovalsNewest(ctx, orgB, a.Status, groups, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
			t.Errorf("ListApprovalsNewest(groups %q) as B = %d rows, %q, %v; want none", groups, len(rows), next, err)
		}
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
		found, err := s.FindApprovals(ctx, org.id, a.Tool, a.Key)
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
		newest, _, err := s.ListApprovalsNewest(ctx, org.id, a.Status, []string{a.ApproverGroup}, "", maxLimit)
		if err != nil || len(newest) != 1 {
			t.Fatalf("ListApprovalsNewest as %s = %d rows, %v; want its one approval", org.name, len(newest), err)
		}
		if d := diff(newest[0], *org.want); d != "" {
			t.Errorf("ListApprovalsNewest as %s: %s", org.name, d)
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

	// A tool's estimate counts its organization's calls alone.
	wantToolUsage(t, s, orgA, "search.web", base, toolplane.UsageStats{Calls: 1, AverageCents: 500, MaxCents: 500})
	wantToolUsage(t, s, orgB, "search.web", base, toolplane.UsageStats{Calls: 1, AverageCents: 7, MaxCents: 7})
	wantToolUsage(t, s, newOrg(), "search.web", base, toolplane.UsageStats{})
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
		{UserID: a.UserID},
		{Outcomes: []string{a.Outcome}},
		{RunID: a.RunID, ApprovalID: a.ApprovalID},
		{Since: base.Add(-time.Hour), Until: base.Add(time.Hour)},
	}
	for _, f := range filters {
		if rows, next, err := s.ListAudit(t.Context(), orgB, f, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
			t.Errorf("ListAudit(%+v) as B = %d rows, %q, %v; want none", f, len(rows), next, err)
		}
	}
	if e, err := s.GetAudit(t.Context(), orgB, a.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetAudit(%s) as B = %v, %v; want ErrNotFound", a.ID, e, err)
	}

	b := fullEvent(orgB, a.ID, at(1))
	b.Outcome = "denied"
	appendAudit(t, s, b)
	wantEvents(t, listAudit(t, s, orgA, toolplane.AuditFilter{}, maxLimit), []toolplane.AuditEvent{*a})
	wantEvents(t, listAudit(t, s, orgB, toolplane.AuditFilter{}, maxLimit), []toolplane.AuditEvent{*b})
	// The same ID in each organization is each one's own event.
	for _, want := range []*toolplane.AuditEvent{a, b} {
		got, err := s.GetAudit(t.Context(), want.OrganizationID, want.ID)
		if err != nil {
			t.Fatalf("GetAudit(%s) in %s = %v", want.ID, want.OrganizationID, err)
		}
		wantEvents(t, []toolplane.AuditEvent{*got}, []toolplane.AuditEvent{*want})
	}
}

func testIsolationGrants(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	a := fullGrant(orgA, "grt-1", "agent-billing", base)
	insertGrant(t, s, a)
	// A grant to a person of A is A's alone too.
	p := fullGrant(orgA, "grt-p", "", at(time.Second))
	p.UserID = "sam"
	insertGrant(t, s, p)
	if err := s.RevokeGrant(ctx, orgB, p.ID, "intruder", at(time.Hour)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("RevokeGrant(person) as B = %v, want ErrNotFound", err)
	}
	if err := s.RevokeGrant(ctx, orgA, p.ID, "admin", at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	p.RevokedAt, p.RevokedBy = at(2*time.Second), "admin"

	for _, agent := range []string{"", a.AgentID} {
		if rows := listGrants(t, s, orgB, agent, true); len(rows) != 0 {
			t.Errorf("ListGrants(%q) as B = %d rows, want none", agent, len(rows))
		}
	}
	if err := s.RevokeGrant(ctx, orgB, a.ID, "intruder", at(time.Hour)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("RevokeGrant as B = %v, want ErrNotFound", err)
	}
	wantRows(t, "ListGrants as A", listGrants(t, s, orgA, "", false), []toolplane.Grant{*a}, grantID)

	// The same ID in B is B's own grant: it neither collides with A's nor
	// shows through A's reads, and revoking it leaves A's standing.
	b := fullGrant(orgB, a.ID, a.AgentID, at(1))
	b.Pattern = "*"
	insertGrant(t, s, b)
	if err := s.RevokeGrant(ctx, orgB, b.ID, "user-b", at(time.Hour)); err != nil {
		t.Fatalf("RevokeGrant as B of its own = %v", err)
	}
	b.RevokedAt, b.RevokedBy = at(time.Hour), "user-b"
	wantRows(t, "ListGrants as A", listGrants(t, s, orgA, "", true), []toolplane.Grant{*a, *p}, grantID)
	wantRows(t, "ListGrants as B", listGrants(t, s, orgB, "", true), []toolplane.Grant{*b}, grantID)
}

func testIsolationDenies(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	a := fullDeny(orgA, "dny-1", base)
	a.AgentID = toolplane.EveryAgent
	insertDeny(t, s, a)

	if rows := listDenies(t, s, orgB); len(rows) != 0 {
		t.Errorf("ListDenies as B = %d rows, want none", len(rows))
	}
	if err := s.DeleteDeny(ctx, orgB, a.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("DeleteDeny as B = %v, want ErrNotFound", err)
	}
	wantRows(t, "ListDenies as A", listDenies(t, s, orgA), []toolplane.Deny{*a}, denyID)

	// The same ID in B is B's own deny, and lifting it leaves A's.
	b := fullDeny(orgB, a.ID, at(1))
	insertDeny(t, s, b)
	wantRows(t, "ListDenies as B", listDenies(t, s, orgB), []toolplane.Deny{*b}, denyID)
	if err := s.DeleteDeny(ctx, orgB, b.ID); err != nil {
		t.Fatalf("DeleteDeny as B of its own = %v", err)
	}
	wantRows(t, "ListDenies as A", listDenies(t, s, orgA), []toolplane.Deny{*a}, denyID)
}

func testIsolationBundles(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	a := fullBundle(orgA, "finance-basics", base)
	putBundle(t, s, a)

	if got, err := s.GetBundle(ctx, orgB, a.Name); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetBundle as B = %+v, %v; want ErrNotFound", got, err)
	}
	if rows, err := s.ListBundles(ctx, orgB); err != nil || len(rows) != 0 {
		t.Errorf("ListBundles as B = %d rows, %v; want none", len(rows), err)
	}

	// A put of the same name in B creates B's own bundle, never replaces
	// A's.
	b := fullBundle(orgB, a.Name, at(time.Hour))
	b.Refs, b.CreatedBy = []string{"*"}, "user-b"
	putBundle(t, s, b)
	wantBundle(t, s, a)
	wantBundle(t, s, b)
	for _, org := range []struct {
		name string
		id   string
		want *toolplane.Bundle
	}{{"A", orgA, a}, {"B", orgB, b}} {
		rows, err := s.ListBundles(ctx, org.id)
		if err != nil {
			t.Fatalf("ListBundles as %s = %v", org.name, err)
		}
		wantRows(t, "ListBundles as "+org.name, rows, []toolplane.Bundle{*org.want}, bundleName)
	}
}

func testIsolationChanges(t *testing.T, s toolplane.Store) {
	orgA, orgB := newOrg(), newOrg()
	a := fullChange(orgA, "chg-1", base)
	appendChange(t, s, a)

	for _, f := range [][2]string{{"", ""}, {a.Kind, ""}, {"", a.Subject}, {a.Kind, a.Subject}} {
		if rows, next, err := s.ListChanges(t.Context(), orgB, f[0], f[1], "", maxLimit); err != nil || len(rows) != 0 || next != "" {
			t.Errorf("ListChanges(%q, %q) as B = %d rows, %q, %v; want none", f[0], f[1], len(rows), next, err)
		}
	}

	b := fullChange(orgB, a.ID, at(1))
	b.Kind = "deny.add"
	appendChange(t, s, b)
	wantRows(t, "ListChanges as A", listChanges(t, s, orgA, "", "", maxLimit), []toolplane.Change{*a}, changeID)
	wantRows(t, "ListChanges as B", listChanges(t, s, orgB, "", "", maxLimit), []toolplane.Change{*b}, changeID)
}

func testIsolationCatalog(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB, p, owner := newOrg(), newOrg(), newToolPrefix(), newOwner()
	a := fullVersion(orgA, p+".refund", "2.1.0", owner, base)
	a.State = toolplane.StateInReview
	insertVersion(t, s, a)

	wantNoVersion(t, s, orgB, a.Name, a.Version)
	for _, f := range []toolplane.VersionFilter{
		{},
		{Name: a.Name},
		{Owner: a.Owner},
		{States: []toolplane.VersionState{a.State}},
		{Name: a.Name, Owner: a.Owner, States: []toolplane.VersionState{a.State}},
	} {
		if rows, next, err := s.ListToolVersions(ctx, orgB, f, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
			t.Errorf("ListToolVersions(%+v) as B = %d rows, %q, %v; want none", f, len(rows), next, err)
		}
	}

	// B approving (or retiring) A's version through an update of its own
	// organization reaches nothing.
	asB := *a
	asB.OrganizationID = orgB
	asB.State, asB.ReviewedBy = toolplane.StateActive, "intruder"
	if ok, err := s.UpdateToolVersion(ctx, &asB); !refused(ok, err) {
		t.Errorf("UpdateToolVersion as B = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	wantVersion(t, s, a)

	// B publishes the same name and version: its own, which neither
	// collides with A's nor shows through A's reads, and whose changes
	// leave A's as they are.
	b := fullVersion(orgB, a.Name, a.Version, newOwner(), at(time.Second))
	b.State, b.Definition = toolplane.StateActive, []byte(`{"name":"b's own"}`)
	insertVersion(t, s, b)
	if err := s.InsertToolVersion(ctx, fullVersion(orgB, a.Name, a.Version, owner, base)); !errors.Is(err, toolplane.ErrExists) {
		t.Errorf("second InsertToolVersion in B = %v, want ErrExists", err)
	}
	b.State = toolplane.StateRetired
	if ok, err := s.UpdateToolVersion(ctx, b); !ok || err != nil {
		t.Fatalf("UpdateToolVersion as B of its own = %v, %v", ok, err)
	}
	wantVersion(t, s, a)
	wantVersion(t, s, b)
	for _, org := range []struct {
		name string
		id   string
		want *toolplane.ToolVersion
	}{{"A", orgA, a}, {"B", orgB, b}} {
		rows := listVersions(t, s, org.id, toolplane.VersionFilter{Name: a.Name}, maxLimit, nil)
		wantRows(t, "ListToolVersions as "+org.name, rows, []toolplane.ToolVersion{*org.want}, versionID)
	}
}

func testIsolationConnections(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	a := fullConnection(orgA, "con-1", base)
	insertConnection(t, s, a)

	wantNoConnection(t, s, orgB, a.ID)
	for _, f := range []toolplane.ConnectionFilter{
		{},
		{Provider: a.Provider},
		{UserID: a.UserID},
		{State: a.State},
		{Provider: a.Provider, UserID: a.UserID, State: a.State},
	} {
		if rows, next, err := s.ListConnections(ctx, orgB, f, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
			t.Errorf("ListConnections(%+v) as B = %d rows, %q, %v; want none", f, len(rows), next, err)
		}
	}

	// B revoking or rewriting A's connection through an update of its own
	// organization reaches nothing, and records nothing.
	asB := *a
	asB.OrganizationID = orgB
	asB.State, asB.RevokedAt = toolplane.ConnectionRevoked, at(time.Hour)
	asB.Secret, asB.Config.Egress.Hosts = []byte("intruder"), []string{"*"}
	if ok, err := s.UpdateConnection(ctx, &asB, newChange(orgB)); !refused(ok, err) {
		t.Errorf("UpdateConnection as B = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	if asB.Version != a.Version {
		t.Errorf("refused UpdateConnection as B changed c.Version to %d", asB.Version)
	}
	wantConnection(t, s, a)
	wantChangeIDs(t, s, orgB)

	// The same ID and name in B is B's own connection: it neither
	// collides with A's nor shows through A's reads, and revoking it
	// leaves A's.
	b := fullConnection(orgB, a.ID, at(1))
	b.Name, b.Secret = a.Name, []byte("B's secret")
	insertConnection(t, s, b)
	b.State, b.RevokedAt = toolplane.ConnectionRevoked, at(time.Hour)
	if ok, err := s.UpdateConnection(ctx, b, nil); !ok || err != nil {
		t.Fatalf("UpdateConnection as B of its own = %v, %v", ok, err)
	}
	wantConnection(t, s, a)
	wantConnection(t, s, b)
	for _, org := range []struct {
		name string
		id   string
		want *toolplane.Connection
	}{{"A", orgA, a}, {"B", orgB, b}} {
		rows := listConnections(t, s, org.id, toolplane.ConnectionFilter{}, maxLimit, nil)
		wantRows(t, "ListConnections as "+org.name, rows, []toolplane.Connection{*org.want}, connectionID)
	}
}

// testIsolationOAuthStates: a state is found by its ID alone (the
// callback knows nothing else), so B can neither hold A's ID nor replace
// A's state; the state answers A's organization, which is how the caller
// learns it.
func testIsolationOAuthStates(t *testing.T, s toolplane.Store) {
	orgA, orgB := newOrg(), newOrg()
	a := fullOAuthState(orgA, oauthStateID(orgA, "1"), base)
	insertOAuthState(t, s, a)

	asB := *a
	asB.OrganizationID, asB.UserID, asB.RedirectURI = orgB, "user-mallory", "https://evil.example.com/"
	if err := s.InsertOAuthState(t.Context(), &asB); !errors.Is(err, toolplane.ErrExists) {
		t.Errorf("InsertOAuthState of A's ID as B = %v, want ErrExists", err)
	}
	b := fullOAuthState(orgB, oauthStateID(orgB, "1"), base)
	insertOAuthState(t, s, b)
	wantTaken(t, s, a.ID, base, a)
	wantTaken(t, s, b.ID, base, b)
}
