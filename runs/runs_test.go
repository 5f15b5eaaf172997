package runs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/runs"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// stores answers the backends a test runs on: a SQLite file always,
// PostgreSQL (a schema of the test's own) when the test server is set.
func stores(t testing.TB) map[string]func(testing.TB) toolplane.Store {
	out := map[string]func(testing.TB) toolplane.Store{
		"sqlite": func(t testing.TB) toolplane.Store { return sqlitetest.New(t) },
	}
	if _, ok := pgtest.LookupDSN(); ok {
		out["postgres"] = func(t testing.TB) toolplane.Store {
			pool, err := pgxpool.New(context.Background(), pgtest.SchemaDSN(t, pgtest.DSN(t)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			pg := postgres.New(pool)
			if err := pg.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return pg
		}
	}
	return out
}

func person(org, subject string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "key_" + subject, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles}
}

var t0 = time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)

// seed stores, in org, run "run-7": a metered lookup, a refund that asked
// for an approval which bob approved, the approved refund, a delete the
// rules denied, a payout that ended uncertain and is still held, a second
// payout that ended uncertain and grace settled, and a transfer filed for
// an approval bob rejected. Its invocation carried a ceiling of 500 cents
// under the tree "root-7". The events are appended out of order, so the
// run's order is the store's to answer.
func seed(t *testing.T, s toolplane.Store, org string) {
	t.Helper()
	ctx := context.Background()
	inv := fmt.Appendf(nil, `{"OrganizationID":%q,"RunID":"run-7","RootRunID":"root-7","AgentID":"agent-billing","Ceilings":{"MaxCostCents":500}}`, org)
	approvals := []toolplane.Approval{
		{ID: "apr_refund_" + org, Status: toolplane.ApprovalApproved, Tool: "shop.refund", ToolVersion: "1.0.0", Key: "k-refund", Rule: "refunds_over_100",
			ApproverGroup: "finance", CreatedAt: t0.Add(2 * time.Second), ResolvedAt: t0.Add(3 * time.Second), ResolvedBy: "bob", ApprovedBy: []string{"bob"}},
		{ID: "apr_transfer_" + org, Status: toolplane.ApprovalRejected, Tool: "bank.transfer", ToolVersion: "2.1.0", Key: "k-transfer",
			CreatedAt: t0.Add(8 * time.Second), ResolvedAt: t0.Add(9 * time.Second), ResolvedBy: "bob", Reason: "wrong account"},
	}
	for _, a := range approvals {
		a.OrganizationID, a.RunID, a.StepPath, a.Invocation, a.PrincipalID = org, "run-7", "agent", inv, "agent-billing"
		a.Arguments, a.ArgumentsHash, a.DefaultOnTimeout, a.ExpiresAt = []byte(`{}`), "sha256:00", "deny", t0.Add(time.Hour)
		if err := s.InsertApproval(ctx, &a); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []toolplane.Claim{
		{Tool: "bank.payout", Key: "k-payout-1", Status: toolplane.ClaimUncertain, Reason: "timed out after dispatch"},
		{Tool: "bank.payout", Key: "k-payout-2", Status: toolplane.ClaimCompleted, ReconciledBy: "grace", Note: "paid, seen in the bank", Result: []byte(`{}`)},
	} {
		c.OrganizationID, c.RunID, c.StepPath, c.RequestHash, c.Invocation = org, "run-7", "agent", "sha256:01", inv
		c.CreatedAt, c.UpdatedAt, c.Dispatched, c.Attempts = t0, t0, true, 1
		if ok, err := s.InsertClaim(ctx, &c); err != nil || !ok {
			t.Fatalf("claim %s: %v %v", c.Key, ok, err)
		}
	}
	call := func(id string, at int, tool, outcome string) *toolplane.AuditEvent {
		return &toolplane.AuditEvent{ID: id + "_" + org, OrganizationID: org, RunID: "run-7", StepPath: "agent", AgentID: "agent-billing",
			Tool: tool, ToolVersion: "1.0.0", Source: toolplane.SourceREST, Outcome: outcome, LatencyMicros: int64(1000 * at),
			CreatedAt: t0.Add(time.Duration(at) * time.Second), PolicyDecision: "allow"}
	}
	lookup := call("aud_1", 1, "shop.lookup", "ok")
	lookup.CostCents = 40
	filed := call("aud_2", 2, "shop.refund", "approval_required")
	filed.ApprovalID, filed.PolicyDecision, filed.PolicyRule, filed.PolicyBundle = "apr_refund_"+org, "require_approval", "refunds_over_100", 3
	decided := &toolplane.AuditEvent{ID: "aud_3_" + org, OrganizationID: org, RunID: "run-7", Kind: toolplane.AuditApproval, Subject: "apr_refund_" + org,
		Tool: "shop.refund", Outcome: "approved", ApprovalID: "apr_refund_" + org, ApproverID: "bob", PrincipalID: "bob", Source: toolplane.SourceControl,
		CreatedAt: t0.Add(3 * time.Second)}
	refunded := call("aud_4", 4, "shop.refund", "ok")
	refunded.AuthorizedBy, refunded.ApproverID, refunded.CostCents = "apr_refund_"+org, "bob", 60
	denied := call("aud_5", 5, "shop.delete", "denied")
	denied.PolicyDecision, denied.PolicyRule, denied.PolicyBundle = "deny", "no_deletes", 3
	held := call("aud_6", 6, "bank.payout", "uncertain")
	held.Key, held.Reason = "k-payout-1", "timed out after dispatch"
	settledCall := call("aud_7", 7, "bank.payout", "uncertain")
	settledCall.Key = "k-payout-2"
	transfer := call("aud_8", 8, "bank.transfer", "approval_required")
	transfer.ApprovalID = "apr_transfer_" + org
	rejected := &toolplane.AuditEvent{ID: "aud_9_" + org, OrganizationID: org, RunID: "run-7", Kind: toolplane.AuditApproval, Subject: "apr_transfer_" + org,
		Tool: "bank.transfer", Outcome: "rejected", ApprovalID: "apr_transfer_" + org, ApproverID: "bob", Reason: "wrong account",
		Source: toolplane.SourceControl, CreatedAt: t0.Add(9 * time.Second)}
	settled := &toolplane.AuditEvent{ID: "aud_10_" + org, OrganizationID: org, RunID: "run-7", Kind: toolplane.AuditReconciliation, Subject: "bank.payout",
		Tool: "bank.payout", Key: "k-payout-2", Outcome: "reconciled", PrincipalID: "grace", Source: toolplane.SourceControl, CreatedAt: t0.Add(10 * time.Second)}
	other := call("aud_other", 5, "shop.lookup", "ok")
	other.RunID = "run-8"
	for _, e := range []*toolplane.AuditEvent{settled, held, lookup, rejected, denied, filed, other, refunded, transfer, decided, settledCall} {
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.InsertUsage(ctx, &toolplane.Usage{ID: "use_1_" + org, OrganizationID: org, RunID: "run-7", RootRunID: "root-7", Tool: "shop.lookup",
		CostCents: 40, Units: 1, CreatedAt: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertUsage(ctx, &toolplane.Usage{ID: "use_2_" + org, OrganizationID: org, RunID: "run-7b", RootRunID: "root-7", Tool: "shop.lookup",
		CostCents: 25, Units: 1, CreatedAt: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
}

func TestGetAssemblesTheRun(t *testing.T) {
	t.Parallel()
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			seed(t, s, "org-a")
			svc := runs.New(s)
			r, err := svc.Get(context.Background(), "run-7", person("org-a", "grace", toolplane.RoleAuditor))
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			for _, e := range r.Timeline {
				order = append(order, e.Kind+":"+e.Tool+":"+e.Outcome)
			}
			want := []string{"call:shop.lookup:ok", "call:shop.refund:approval_required", "approval:shop.refund:approved", "call:shop.refund:ok",
				"call:shop.delete:denied", "call:bank.payout:uncertain", "call:bank.payout:uncertain", "call:bank.transfer:approval_required",
				"approval:bank.transfer:rejected", "reconciliation:bank.payout:reconciled"}
			if fmt.Sprint(order) != fmt.Sprint(want) {
				t.Fatalf("timeline\n got %v\nwant %v", order, want)
			}
			if r.Timeline[2].By != "bob" || r.Timeline[9].By != "grace" {
				t.Errorf("deciders: %q, %q", r.Timeline[2].By, r.Timeline[9].By)
			}
			// Each call says whose it is: a run's id is its callers' to
			// choose.
			for _, c := range r.Calls {
				if c.AgentID != "agent-billing" {
					t.Errorf("call %s of %s: agent %q, want agent-billing", c.AuditID, c.Tool, c.AgentID)
				}
			}
			if r.Timeline[0].AgentID != "agent-billing" || r.Timeline[2].AgentID != "" {
				t.Errorf("timeline agents: a call's %q, an approval's %q", r.Timeline[0].AgentID, r.Timeline[2].AgentID)
			}
			if len(r.Calls) != 7 || r.Calls[0].CostCents != 40 || r.Calls[0].LatencyMicros != 1000 || r.Calls[2].ApprovalID != "apr_refund_org-a" {
				t.Errorf("calls: %+v", r.Calls)
			}
			if r.Status != runs.StatusUncertain || !r.EndedAt.IsZero() {
				t.Errorf("status %q, ended %v; want uncertain, not ended", r.Status, r.EndedAt)
			}
			if r.AgentID != "agent-billing" || !r.StartedAt.Equal(t0.Add(time.Second)) || !r.LastAt.Equal(t0.Add(10*time.Second)) {
				t.Errorf("summary: %q %v %v", r.AgentID, r.StartedAt, r.LastAt)
			}
			if len(r.Approvals) != 2 {
				t.Fatalf("approvals: %+v", r.Approvals)
			}
			if a := r.Approvals[0]; a.Status != toolplane.ApprovalApproved || a.DecidedBy != "bob" || !a.DecidedAt.Equal(t0.Add(3*time.Second)) || a.Rule != "refunds_over_100" {
				t.Errorf("the refund's approval: %+v", a)
			}
			if a := r.Approvals[1]; a.Status != toolplane.ApprovalRejected || a.DecidedBy != "bob" || a.Reason != "wrong account" {
				t.Errorf("the transfer's approval: %+v", a)
			}
			if len(r.Uncertain) != 2 || !r.Uncertain[0].Open || r.Uncertain[0].Reason != "timed out after dispatch" {
				t.Fatalf("uncertain: %+v", r.Uncertain)
			}
			if u := r.Uncertain[1]; u.Open || u.SettledBy != "grace" || u.Outcome != "reconciled" || u.Note != "paid, seen in the bank" {
				t.Errorf("the settled payout: %+v", u)
			}
			var decisions []string
			for _, d := range r.Decisions {
				decisions = append(decisions, d.Tool+":"+d.Decision+":"+d.Rule)
			}
			if want := "[shop.lookup:allow: shop.refund:require_approval:refunds_over_100 shop.refund:allow: shop.delete:deny:no_deletes " +
				"bank.payout:allow: bank.payout:allow: bank.transfer:allow:]"; fmt.Sprint(decisions) != want {
				t.Errorf("decisions\n got %v\nwant %s", decisions, want)
			}
			want2 := runs.Spend{RunCents: 100, RootRunID: "root-7", TreeCents: 65, TreeRead: true, CeilingCents: 500, CeilingKnown: true}
			if r.Spend != want2 {
				t.Errorf("spend %+v, want %+v", r.Spend, want2)
			}
		})
	}
}

// TestGetIsScopedToTheOrganization: the same run id in two organizations
// is two runs, each read only by its own; a run another organization
// holds answers not found to the first exactly as a missing one does.
func TestGetIsScopedToTheOrganization(t *testing.T) {
	t.Parallel()
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			seed(t, s, "org-a")
			seed(t, s, "org-b")
			ctx := context.Background()
			if err := s.AppendAudit(ctx, &toolplane.AuditEvent{ID: "aud_b_only", OrganizationID: "org-b", RunID: "run-b-only", Tool: "shop.lookup",
				Source: toolplane.SourceREST, Outcome: "ok", CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
			svc := runs.New(s)
			for _, org := range []string{"org-a", "org-b"} {
				r, err := svc.Get(ctx, "run-7", person(org, "grace", toolplane.RoleAuditor))
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range r.Timeline {
					if e.AuditID[len(e.AuditID)-len(org):] != org {
						t.Errorf("%s read %s's event %s", org, "another organization", e.AuditID)
					}
				}
				for _, a := range r.Approvals {
					if a.ID[len(a.ID)-len(org):] != org {
						t.Errorf("%s read approval %s", org, a.ID)
					}
				}
			}
			_, other := svc.Get(ctx, "run-b-only", person("org-a", "grace", toolplane.RoleAuditor))
			_, missing := svc.Get(ctx, "run-nowhere", person("org-a", "grace", toolplane.RoleAuditor))
			if !errors.Is(other, toolplane.ErrNotFound) || !errors.Is(missing, toolplane.ErrNotFound) {
				t.Fatalf("another organization's run: %v; a missing run: %v; want both not found", other, missing)
			}
			if got, want := other.Error(), missing.Error(); got[len("run run-b-only"):] != want[len("run run-nowhere"):] {
				t.Errorf("the answers differ past the id: %q, %q", got, want)
			}
			if _, err := svc.Get(ctx, "run-b-only", person("org-b", "grace", toolplane.RoleAuditor)); err != nil {
				t.Errorf("its own organization: %v", err)
			}
		})
	}
}

func TestGetRefuses(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	seed(t, s, "org-a")
	svc := runs.New(s)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		by   *toolplane.Credential
		id   string
		want error
	}{
		{"an approver, of a run that filed no approval", person("org-a", "bob", toolplane.RoleApprover), "run-8", toolplane.ErrNotFound},
		{"an approver, of another organization's run", person("org-b", "bob", toolplane.RoleApprover), "run-7", toolplane.ErrNotFound},
		{"a tool owner", person("org-a", "tess", toolplane.RoleToolOwner+":shop"), "run-7", toolplane.ErrForbidden},
		{"an agent", &toolplane.Credential{ID: "key_agent", OrganizationID: "org-a", Kind: toolplane.CredentialAgent, Subject: "agent-billing"}, "run-7", toolplane.ErrForbidden},
		{"nobody", nil, "run-7", toolplane.ErrUnauthenticated},
		{"an id longer than any run's", person("org-a", "grace", toolplane.RoleAuditor), string(make([]byte, toolplane.MaxRunLen+1)), toolplane.ErrInvalid},
		{"no id", person("org-a", "grace", toolplane.RoleAuditor), "", toolplane.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := svc.Get(ctx, tc.id, tc.by); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if r, err := svc.Get(ctx, "run-7", person("org-a", "root", toolplane.RolePlatformAdmin)); err != nil || r.ID != "run-7" {
		t.Fatalf("a platform admin: %v", err)
	}
	// An approver reads a run that asked for an approval: the context of
	// what they decide, which the approval card links to.
	if r, err := svc.Get(ctx, "run-7", person("org-a", "bob", toolplane.RoleApprover)); err != nil || len(r.Approvals) == 0 {
		t.Fatalf("an approver, of a run that asked for approvals: %v", err)
	}
}

// TestGetStatus: what a person must do about a run decides its status.
func TestGetStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := sqlitetest.New(t)
	svc := runs.New(s)
	by := person("org-a", "grace", toolplane.RoleAuditor)
	ev := func(id, run, outcome, approval string, at int) {
		t.Helper()
		if err := s.AppendAudit(ctx, &toolplane.AuditEvent{ID: id, OrganizationID: "org-a", RunID: run, Tool: "shop.refund", Source: toolplane.SourceREST,
			Outcome: outcome, ApprovalID: approval, CreatedAt: t0.Add(time.Duration(at) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	ev("aud_ok", "run-ok", "ok", "", 1)
	ev("aud_fail_1", "run-fail", "ok", "", 1)
	ev("aud_fail_2", "run-fail", "timeout", "", 2)
	ev("aud_wait", "run-wait", "approval_required", "apr_wait", 1)
	if err := s.InsertApproval(ctx, &toolplane.Approval{ID: "apr_wait", OrganizationID: "org-a", RunID: "run-wait", Tool: "shop.refund", Key: "k",
		ArgumentsHash: "sha256:00", Arguments: []byte(`{}`), Status: toolplane.ApprovalPending, DefaultOnTimeout: "deny", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string]runs.Status{"run-ok": runs.StatusOK, "run-fail": runs.StatusFailed, "run-wait": runs.StatusWaiting} {
		r, err := svc.Get(ctx, run, by)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != want {
			t.Errorf("%s: %q, want %q", run, r.Status, want)
		}
		if ended := !r.EndedAt.IsZero(); ended != (want != runs.StatusWaiting) {
			t.Errorf("%s: ended %v", run, r.EndedAt)
		}
		// Nothing of these runs was stored with its invocation.
		if r.Spend.CeilingKnown || r.Spend.RootRunID != run {
			t.Errorf("%s: ceiling known %v, tree %q", run, r.Spend.CeilingKnown, r.Spend.RootRunID)
		}
	}
}

// TestGetBoundsALongRun: a run of more events than MaxEvents shows its
// newest, in order, and says it was cut.
func TestGetBoundsALongRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := sqlitetest.New(t)
	batch := make([]*toolplane.AuditEvent, 0, runs.MaxEvents+5)
	for i := range runs.MaxEvents + 5 {
		batch = append(batch, &toolplane.AuditEvent{ID: fmt.Sprintf("aud_%05d", i), OrganizationID: "org-a", RunID: "run-long", Tool: "shop.lookup",
			Source: toolplane.SourceREST, Outcome: "ok", CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	if err := s.AppendAuditBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	r, err := runs.New(s).Get(ctx, "run-long", person("org-a", "grace", toolplane.RoleAuditor))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.Calls) != runs.MaxEvents || r.Calls[0].AuditID != "aud_00005" || r.Calls[len(r.Calls)-1].AuditID != fmt.Sprintf("aud_%05d", runs.MaxEvents+4) {
		t.Fatalf("truncated %v, %d calls from %s", r.Truncated, len(r.Calls), r.Calls[0].AuditID)
	}
}
