package spend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/spend"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func cred(org string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "key_" + org, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "someone", Roles: roles}
}

// TestServiceAuthorizesAndReports: an administrator sets and removes the
// ceiling, an auditor reads it and the reports, anyone else is refused;
// a report's lines and totals are the organization's usage rows in the
// range, and a request out of form names its field.
func TestServiceAuthorizesAndReports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	svc := spend.New(store, func() time.Time { return now })
	admin, auditor, agent := cred("org-1", toolplane.RolePlatformAdmin), cred("org-1", toolplane.RoleAuditor), cred("org-1")
	for _, u := range []toolplane.Usage{
		{ID: "u1", OrganizationID: "org-1", RunID: "r", RootRunID: "r", AgentID: "a1", Tool: "t1", CostCents: 5, Units: 1, CreatedAt: now.Add(-time.Hour)},
		{ID: "u2", OrganizationID: "org-1", RunID: "r", RootRunID: "r", AgentID: "a1", Tool: "t2", CostCents: 7, Units: 1, CreatedAt: now.AddDate(0, 0, -2)},
		{ID: "u3", OrganizationID: "org-1", RunID: "r", RootRunID: "r", AgentID: "a2", Tool: "t1", CostCents: 100, Units: 1, CreatedAt: now.AddDate(0, 0, -40)},
		{ID: "u1", OrganizationID: "org-2", RunID: "r", RootRunID: "r", AgentID: "a1", Tool: "t1", CostCents: 1000, Units: 1, CreatedAt: now.Add(-time.Hour)},
	} {
		if err := store.InsertUsage(ctx, &u); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := svc.SetCeiling(ctx, auditor, 10); !errors.Is(err, toolplane.ErrForbidden) {
		t.Fatalf("the auditor set a ceiling: %v", err)
	}
	if _, err := svc.Ceiling(ctx, agent); !errors.Is(err, toolplane.ErrForbidden) {
		t.Fatalf("an agent read the ceiling: %v", err)
	}
	if _, err := svc.Report(ctx, agent, spend.Query{}); !errors.Is(err, toolplane.ErrForbidden) {
		t.Fatalf("an agent read a report: %v", err)
	}
	for _, cents := range []int64{0, -1, toolplane.MaxDailyCeilingCents + 1} {
		var invalid *spend.InvalidError
		if _, err := svc.SetCeiling(ctx, admin, cents); !errors.As(err, &invalid) || invalid.Field != "daily_cents" {
			t.Fatalf("a ceiling of %d: %v", cents, err)
		}
	}
	st, err := svc.SetCeiling(ctx, admin, 5)
	if err != nil || st.Ceiling == nil || st.Ceiling.DailyCents != 5 || st.SpentCents != 5 || !st.Exhausted || st.Day != "2026-12-04" {
		t.Fatalf("set: %+v, %v", st, err)
	}
	if st, err := svc.Ceiling(ctx, cred("org-2", toolplane.RoleAuditor)); err != nil || st.Ceiling != nil || st.SpentCents != 1000 {
		t.Fatalf("the other organization's status: %+v, %v", st, err)
	}

	rep, err := svc.Report(ctx, auditor, spend.Query{By: toolplane.SpendByAgent})
	if err != nil || rep.TotalCents != 12 || rep.Calls != 2 || len(rep.Lines) != 1 || rep.Lines[0].Key != "a1" {
		t.Fatalf("the last 30 days by agent: %+v, %v", rep, err)
	}
	rep, err = svc.Report(ctx, auditor, spend.Query{From: now.AddDate(0, 0, -60)})
	if err != nil || rep.By != toolplane.SpendByDay || rep.TotalCents != 112 || len(rep.Lines) != 3 {
		t.Fatalf("60 days by day: %+v, %v", rep, err)
	}
	for _, q := range []struct {
		q     spend.Query
		field string
	}{
		{spend.Query{By: "person"}, "by"},
		{spend.Query{From: now, To: now}, "from"},
		{spend.Query{From: now.AddDate(-2, 0, 0), To: now}, "from"},
	} {
		var invalid *spend.InvalidError
		if _, err := svc.Report(ctx, auditor, q.q); !errors.As(err, &invalid) || invalid.Field != q.field {
			t.Errorf("%+v: %v, want a refusal at %s", q.q, err, q.field)
		}
	}
	if err := svc.DeleteCeiling(ctx, auditor); !errors.Is(err, toolplane.ErrForbidden) {
		t.Fatalf("the auditor deleted the ceiling: %v", err)
	}
	if err := svc.DeleteCeiling(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteCeiling(ctx, admin); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("a second delete: %v", err)
	}
	changes, _, err := store.ListChanges(ctx, "org-1", "", "spend", "", 10)
	if err != nil || len(changes) != 2 {
		t.Fatalf("changes %+v, %v; want the set and the delete", changes, err)
	}
}
