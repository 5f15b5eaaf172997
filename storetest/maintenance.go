package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/jobs"
)

// MaintenanceStore is a store with the background sweeps' maintenance
// reads and deletes (jobs.Maintenance), as every backend serves them.
type MaintenanceStore interface {
	toolplane.Store
	jobs.Maintenance
}

// maintenanceCase is one named maintenance check.
type maintenanceCase struct {
	name string
	run  func(t *testing.T, s MaintenanceStore, badLimit error)
}

var maintenanceCases = []maintenanceCase{
	{"ExpiredAndCompletedClaims", testMaintenanceClaims},
	{"ApprovedApprovals", testMaintenanceApprovedApprovals},
	{"DeadNodes", testMaintenanceDeadNodes},
	{"Limit", testMaintenanceLimit},
}

// RunMaintenance runs the checks of what jobs.Maintenance promises (lease
// expiry, retention of completed claims and dead node instances, approved
// calls waiting for execution) as subtests of t, named
// Maintenance/Check.
//
// The maintenance reads cross organizations, so unlike Run's, newStore
// must answer a migrated store on a database of its own, closed by
// t.Cleanup. badLimit is the error a backend answers (wrapped) for a limit
// outside 1..1000: a bad limit is refused with it, never clamped.
func RunMaintenance(t *testing.T, newStore func(t *testing.T) MaintenanceStore, badLimit error) {
	t.Helper()
	if badLimit == nil {
		t.Fatal("RunMaintenance needs the backend's limit error")
	}
	var checks []check
	for _, c := range maintenanceCases {
		checks = append(checks, check{c.name, func(t *testing.T) { c.run(t, newStore(t), badLimit) }})
	}
	runChecks(t, "Maintenance", checks)
}

// maintenanceNow is the sweeps' present in the maintenance checks.
var maintenanceNow = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// claimKeys answers the claims as "organization/key", in order.
func claimKeys(cs []toolplane.Claim) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.OrganizationID+"/"+c.Key)
	}
	return strings.Join(out, " ")
}

// testMaintenanceClaims: ExpiredClaims answers the processing claims whose
// lease ended, across organizations, oldest lease first; claims with no
// lease, a lease ending now or later, or another status are not expired.
// DeleteCompletedClaims removes completed claims past retention, across
// organizations, at most limit a call, and keeps those inside retention.
func testMaintenanceClaims(t *testing.T, s MaintenanceStore, _ error) {
	ctx := t.Context()
	now := maintenanceNow
	claim := func(org, key string, status toolplane.ClaimStatus, lease, updated time.Time) {
		t.Helper()
		c := &toolplane.Claim{OrganizationID: org, Tool: "crm.write", Key: key, Status: status,
			LeaseUntil: lease, CreatedAt: now.Add(-time.Hour), UpdatedAt: updated}
		if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
			t.Fatalf("InsertClaim(%s) = %v, %v", key, ok, err)
		}
	}
	// Two organizations, so the sweeps are seen to cross them.
	claim("org-a", "expired-2", toolplane.ClaimProcessing, now.Add(-time.Minute), now)
	claim("org-b", "expired-1", toolplane.ClaimProcessing, now.Add(-time.Hour), now)
	claim("org-a", "leased", toolplane.ClaimProcessing, now.Add(time.Minute), now)
	claim("org-a", "at-now", toolplane.ClaimProcessing, now, now)
	claim("org-a", "no-lease", toolplane.ClaimProcessing, time.Time{}, now)
	claim("org-a", "uncertain", toolplane.ClaimUncertain, now.Add(-time.Hour), now)
	claim("org-a", "done-old", toolplane.ClaimCompleted, time.Time{}, now.Add(-48*time.Hour))
	claim("org-b", "done-older", toolplane.ClaimCompleted, time.Time{}, now.Add(-72*time.Hour))
	claim("org-b", "done-new", toolplane.ClaimCompleted, time.Time{}, now)
	// Claims that reached their state by an update, not an insert: a
	// backend's sweep indexes may hold one state each, and an update moves
	// a claim in and out of them.
	claim("org-a", "expired-later", toolplane.ClaimProcessing, now.Add(time.Minute), now)
	claim("org-a", "done-later", toolplane.ClaimProcessing, now.Add(time.Minute), now)
	update := func(key string, change func(*toolplane.Claim)) {
		t.Helper()
		c, err := s.GetClaim(ctx, "org-a", "crm.write", key)
		if err != nil {
			t.Fatal(err)
		}
		change(c)
		if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
			t.Fatalf("UpdateClaim(%s) = %v, %v", key, ok, err)
		}
	}
	update("expired-later", func(c *toolplane.Claim) { c.LeaseUntil = now.Add(-30 * time.Minute) })
	update("expired-later", func(c *toolplane.Claim) { c.Dispatched, c.Attempts = true, 1 })
	update("done-later", func(c *toolplane.Claim) {
		c.Status, c.LeaseUntil, c.UpdatedAt = toolplane.ClaimCompleted, time.Time{}, now.Add(-96*time.Hour)
	})
	update("leased", func(c *toolplane.Claim) { c.Dispatched, c.Attempts = true, 1 })

	expired, err := s.ExpiredClaims(ctx, now, 10)
	if got, want := claimKeys(expired), "org-b/expired-1 org-a/expired-later org-a/expired-2"; err != nil || got != want {
		t.Errorf("ExpiredClaims = %q, %v; want %q", got, err, want)
	}
	expired, err = s.ExpiredClaims(ctx, now, 1)
	if got, want := claimKeys(expired), "org-b/expired-1"; err != nil || got != want {
		t.Errorf("ExpiredClaims(limit 1) = %q, %v; want %q", got, err, want)
	}

	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-24*time.Hour), 1); n != 1 || err != nil {
		t.Errorf("DeleteCompletedClaims(limit 1) = %d, %v; want 1", n, err)
	}
	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-24*time.Hour), 10); n != 2 || err != nil {
		t.Errorf("DeleteCompletedClaims = %d, %v; want the other 2", n, err)
	}
	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-24*time.Hour), 10); n != 0 || err != nil {
		t.Errorf("DeleteCompletedClaims again = %d, %v; want 0", n, err)
	}
	for _, k := range []string{"done-old", "done-older", "done-later"} {
		for _, org := range []string{"org-a", "org-b"} {
			if _, err := s.GetClaim(ctx, org, "crm.write", k); !errors.Is(err, toolplane.ErrNotFound) {
				t.Errorf("GetClaim(%s/%s) after the sweep = %v, want ErrNotFound", org, k, err)
			}
		}
	}
	if _, err := s.GetClaim(ctx, "org-b", "crm.write", "done-new"); err != nil {
		t.Errorf("the sweep removed a claim inside retention: %v", err)
	}
}

// testMaintenanceApprovedApprovals: ApprovedApprovals answers the approvals
// resolved approved at or after since, across organizations, oldest
// resolution first; rejected and pending ones are not waiting to execute.
func testMaintenanceApprovedApprovals(t *testing.T, s MaintenanceStore, _ error) {
	ctx := t.Context()
	now := maintenanceNow
	approval := func(org, id string, status toolplane.ApprovalStatus, resolved time.Time) {
		t.Helper()
		a := &toolplane.Approval{OrganizationID: org, ID: id, Status: status, CreatedAt: now.Add(-time.Hour), ResolvedAt: resolved}
		if err := s.InsertApproval(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	approval("org-a", "apr-2", toolplane.ApprovalApproved, now)
	approval("org-b", "apr-1", toolplane.ApprovalApproved, now.Add(-time.Minute))
	approval("org-a", "apr-old", toolplane.ApprovalApproved, now.Add(-time.Hour))
	approval("org-a", "apr-rejected", toolplane.ApprovalRejected, now)
	approval("org-a", "apr-pending", toolplane.ApprovalPending, time.Time{})
	approved, err := s.ApprovedApprovals(ctx, now.Add(-time.Minute), 10)
	var ids []string
	for _, a := range approved {
		ids = append(ids, a.OrganizationID+"/"+a.ID)
	}
	if got, want := strings.Join(ids, " "), "org-b/apr-1 org-a/apr-2"; err != nil || got != want {
		t.Errorf("ApprovedApprovals = %q, %v; want %q", got, err, want)
	}
	if approved, err := s.ApprovedApprovals(ctx, now.Add(-time.Minute), 1); err != nil || len(approved) != 1 || approved[0].ID != "apr-1" {
		t.Errorf("ApprovedApprovals(limit 1) = %+v, %v; want apr-1 alone", approved, err)
	}
}

// testMaintenanceDeadNodes: OrphanedClaims answers the processing claims
// of the dead node instances (silent, or retired at the epoch), and
// DeleteDeadNodes removes a dead instance only once it holds no processing
// claim, so a claim being decided never loses its holder's row.
func testMaintenanceDeadNodes(t *testing.T, s MaintenanceStore, _ error) {
	ctx := t.Context()
	now := maintenanceNow
	node := func(id string, heartbeat time.Time) {
		t.Helper()
		if err := s.InsertNode(ctx, &toolplane.Node{ID: id, Name: id, StartedAt: now.Add(-3 * time.Hour), HeartbeatAt: heartbeat}); err != nil {
			t.Fatal(err)
		}
	}
	held := func(key, node string, status toolplane.ClaimStatus) {
		t.Helper()
		c := &toolplane.Claim{OrganizationID: "org-n", Tool: "crm.write", Key: key, Status: status,
			Node: node, CreatedAt: now.Add(-time.Hour), UpdatedAt: now}
		if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
			t.Fatalf("InsertClaim(%s) = %v, %v", key, ok, err)
		}
	}
	decide := func(key string) {
		t.Helper()
		c, err := s.GetClaim(ctx, "org-n", "crm.write", key)
		if err != nil {
			t.Fatal(err)
		}
		c.Status = toolplane.ClaimUncertain
		if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
			t.Fatalf("UpdateClaim(%s) = %v, %v", key, ok, err)
		}
	}
	node("dead-busy", now.Add(-2*time.Hour))
	node("dead-idle", now.Add(-2*time.Hour))
	node("alive", now)
	node("retired", now)
	node("retired-successor", now)
	if _, err := s.RetireNodes(ctx, "retired", "retired-successor"); err != nil {
		t.Fatal(err)
	}
	held("held-dead", "dead-busy", toolplane.ClaimProcessing)
	held("done-dead", "dead-busy", toolplane.ClaimCompleted)
	held("done-idle", "dead-idle", toolplane.ClaimCompleted)
	held("uncertain-idle", "dead-idle", toolplane.ClaimUncertain)
	held("held-alive", "alive", toolplane.ClaimProcessing)
	held("held-retired", "retired", toolplane.ClaimProcessing)

	orphaned, err := s.OrphanedClaims(ctx, now.Add(-time.Minute), 10)
	got := strings.Fields(claimKeys(orphaned))
	slices.Sort(got)
	if want := []string{"org-n/held-dead", "org-n/held-retired"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("OrphanedClaims = %v, %v; want %v", got, err, want)
	}
	if orphaned, err := s.OrphanedClaims(ctx, now.Add(-time.Minute), 1); err != nil || len(orphaned) != 1 {
		t.Errorf("OrphanedClaims(limit 1) = %d claims, %v; want 1", len(orphaned), err)
	}
	if n, err := s.DeleteDeadNodes(ctx, now.Add(-time.Minute), 10); n != 1 || err != nil {
		t.Errorf("DeleteDeadNodes = %d, %v; want 1 (dead-idle)", n, err)
	}
	for id, wantKept := range map[string]bool{"dead-busy": true, "dead-idle": false, "alive": true, "retired": true} {
		_, err := s.GetNode(ctx, id)
		if kept := err == nil; kept != wantKept || (!kept && !errors.Is(err, toolplane.ErrNotFound)) {
			t.Errorf("GetNode(%s) after DeleteDeadNodes = %v; want kept %v", id, err, wantKept)
		}
	}
	// Once its claim is decided, the dead instance goes too.
	decide("held-dead")
	if n, err := s.DeleteDeadNodes(ctx, now.Add(-time.Minute), 10); n != 1 || err != nil {
		t.Errorf("DeleteDeadNodes after the claim was decided = %d, %v; want 1 (dead-busy)", n, err)
	}
	// A retired instance removed by retention stays gone: its late
	// heartbeat does not store it again.
	decide("held-retired")
	if n, err := s.DeleteDeadNodes(ctx, now.Add(-time.Minute), 10); n != 1 || err != nil {
		t.Errorf("DeleteDeadNodes after the retired instance's claim was decided = %d, %v; want 1", n, err)
	}
	if err := s.Heartbeat(ctx, &toolplane.Node{ID: "retired", Name: "retired", StartedAt: now.Add(-3 * time.Hour), HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.GetNode(ctx, "retired"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetNode(retired) after retention and a late heartbeat = %v, %v; want ErrNotFound", n, err)
	}
}

// testMaintenanceLimit: every maintenance method refuses a limit outside
// 1..1000 with the backend's limit error, with rows there to answer, so a
// store that only checks the limit when it reads a row fails too.
func testMaintenanceLimit(t *testing.T, s MaintenanceStore, badLimit error) {
	ctx := t.Context()
	now := maintenanceNow
	c := &toolplane.Claim{OrganizationID: "org-a", Tool: "crm.write", Key: "k", Status: toolplane.ClaimProcessing,
		Node: "dead", LeaseUntil: now.Add(-time.Hour), CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour)}
	if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
		t.Fatalf("InsertClaim = %v, %v", ok, err)
	}
	if err := s.InsertNode(ctx, &toolplane.Node{ID: "dead", Name: "dead", StartedAt: now.Add(-3 * time.Hour), HeartbeatAt: now.Add(-2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{0, maxLimit + 1} {
		if _, err := s.ExpiredClaims(ctx, now, limit); !errors.Is(err, badLimit) {
			t.Errorf("ExpiredClaims(limit %d) err = %v, want %v", limit, err, badLimit)
		}
		if _, err := s.DeleteCompletedClaims(ctx, now, limit); !errors.Is(err, badLimit) {
			t.Errorf("DeleteCompletedClaims(limit %d) err = %v, want %v", limit, err, badLimit)
		}
		if _, err := s.ApprovedApprovals(ctx, now, limit); !errors.Is(err, badLimit) {
			t.Errorf("ApprovedApprovals(limit %d) err = %v, want %v", limit, err, badLimit)
		}
		if _, err := s.OrphanedClaims(ctx, now, limit); !errors.Is(err, badLimit) {
			t.Errorf("OrphanedClaims(limit %d) err = %v, want %v", limit, err, badLimit)
		}
		if _, err := s.DeleteDeadNodes(ctx, now, limit); !errors.Is(err, badLimit) {
			t.Errorf("DeleteDeadNodes(limit %d) err = %v, want %v", limit, err, badLimit)
		}
	}
}
