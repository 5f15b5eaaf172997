package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var spendCases = []suiteCase{
	{"DayCounter", testSpendDayCounter},
	{"Ceiling", testSpendCeiling},
	{"Report", testSpendReport},
	{"Isolation", testSpendIsolation},
}

// spent is a usage row of agent's call of tool at, costing cents.
func spent(org, id, agent, tool string, at time.Time, cents int64) *toolplane.Usage {
	u := usage(org, id, "root-1", cents)
	u.AgentID, u.Tool, u.CreatedAt = agent, tool, at
	return u
}

func wantDay(t *testing.T, s toolplane.Store, org string, at time.Time, want toolplane.DaySpend) {
	t.Helper()
	got, err := s.DaySpend(t.Context(), org, toolplane.SpendDay(at))
	if err != nil || got != want {
		t.Errorf("DaySpend(%s) = %+v, %v; want %+v", at.UTC().Format(time.DateOnly), got, err, want)
	}
}

func spendChange(org, kind string) *toolplane.Change {
	return &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: org, Kind: kind, Subject: "spend",
		Actor: "admin@example.com", Detail: []byte(`{"daily_cents":1}`), CreatedAt: base}
}

// testSpendDayCounter: each usage row adds to its UTC day's counter (a
// row past midnight UTC to the next day's, whatever the row's zone), and a
// duplicate row, refused, adds nothing.
func testSpendDayCounter(t *testing.T, s toolplane.Store) {
	org := newOrg()
	day := time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)
	wantDay(t, s, org, day, toolplane.DaySpend{})
	insertUsage(t, s, spent(org, "u1", "a1", "search.web", day, 100))
	insertUsage(t, s, spent(org, "u2", "a2", "search.web", day.Add(23*time.Hour+59*time.Minute), 250))
	// 00:30 UTC on the 15th, written in a zone where it is still the 14th.
	insertUsage(t, s, spent(org, "u3", "a1", "search.web", day.Add(24*time.Hour+30*time.Minute).In(time.FixedZone("UTC-5", -5*60*60)), 1<<40))
	if err := s.InsertUsage(t.Context(), spent(org, "u1", "a1", "search.web", day, 100)); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("duplicate InsertUsage = %v, want ErrExists", err)
	}
	wantDay(t, s, org, day, toolplane.DaySpend{SpentCents: 350, Calls: 2})
	wantDay(t, s, org, day.Add(24*time.Hour), toolplane.DaySpend{SpentCents: 1 << 40, Calls: 1})
	wantDay(t, s, org, day.Add(-24*time.Hour), toolplane.DaySpend{})
}

// testSpendCeiling: a ceiling is put, replaced, read with the day's spend
// and deleted, each change recorded in the change log.
func testSpendCeiling(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	org := newOrg()
	if _, err := s.GetSpendCeiling(ctx, org); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetSpendCeiling before any = %v, want ErrNotFound", err)
	}
	c := &toolplane.SpendCeiling{OrganizationID: org, DailyCents: 5000, UpdatedBy: "admin@example.com", UpdatedAt: base}
	if err := s.PutSpendCeiling(ctx, c, spendChange(org, "spend_ceiling.set")); err != nil {
		t.Fatal(err)
	}
	c.DailyCents, c.UpdatedAt = 7000, base.Add(time.Minute)
	if err := s.PutSpendCeiling(ctx, c, spendChange(org, "spend_ceiling.set")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSpendCeiling(ctx, org)
	if err != nil || got.DailyCents != 7000 || got.UpdatedBy != c.UpdatedBy || !got.UpdatedAt.Equal(c.UpdatedAt.Truncate(time.Microsecond)) {
		t.Fatalf("GetSpendCeiling = %+v, %v", got, err)
	}
	insertUsage(t, s, spent(org, "u1", "a1", "search.web", base, 40))
	wantDay(t, s, org, base, toolplane.DaySpend{CeilingCents: 7000, SpentCents: 40, Calls: 1})
	// A change that cannot be recorded stores nothing.
	dup := spendChange(org, "spend_ceiling.set")
	if err := s.PutSpendCeiling(ctx, c, dup); err != nil {
		t.Fatal(err)
	}
	c.DailyCents = 1
	if err := s.PutSpendCeiling(ctx, c, dup); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("PutSpendCeiling with a duplicate change = %v, want ErrExists", err)
	}
	if got, _ := s.GetSpendCeiling(ctx, org); got == nil || got.DailyCents != 7000 {
		t.Fatalf("ceiling after a refused change = %+v, want 7000 kept", got)
	}
	if ok, err := s.DeleteSpendCeiling(ctx, org, spendChange(org, "spend_ceiling.delete")); !ok || err != nil {
		t.Fatalf("DeleteSpendCeiling = %v, %v", ok, err)
	}
	if ok, err := s.DeleteSpendCeiling(ctx, org, spendChange(org, "spend_ceiling.delete")); ok || err != nil {
		t.Fatalf("second DeleteSpendCeiling = %v, %v; want false, nil", ok, err)
	}
	wantDay(t, s, org, base, toolplane.DaySpend{SpentCents: 40, Calls: 1})
	sets, _, err := s.ListChanges(ctx, org, "spend_ceiling.set", "", "", 10)
	if err != nil || len(sets) != 3 {
		t.Fatalf("set changes = %d, %v; want 3", len(sets), err)
	}
	dels, _, err := s.ListChanges(ctx, org, "spend_ceiling.delete", "", "", 10)
	if err != nil || len(dels) != 1 {
		t.Fatalf("delete changes = %d, %v; want 1 (none for a delete that found nothing)", len(dels), err)
	}
}

// testSpendReport: a report groups the rows of [from, to) by agent, tool
// or UTC day, ordered by key, cut at its limit.
func testSpendReport(t *testing.T, s toolplane.Store) {
	org := newOrg()
	day := time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)
	for _, u := range []*toolplane.Usage{
		spent(org, "u1", "a1", "search.web", day.Add(time.Hour), 100),
		spent(org, "u2", "a2", "search.web", day.Add(2*time.Hour), 20),
		spent(org, "u3", "a1", "crm.lookup", day.Add(25*time.Hour), 3),
		spent(org, "u4", "", "crm.lookup", day.Add(47*time.Hour), 4),
		spent(org, "u5", "a1", "crm.lookup", day.Add(48*time.Hour), 1000), // at to: outside
		spent(org, "u6", "a1", "crm.lookup", day.Add(-time.Microsecond), 1000),
	} {
		insertUsage(t, s, u)
	}
	from, to := day, day.Add(48*time.Hour)
	for _, tt := range []struct {
		by    toolplane.SpendBy
		limit int
		want  []toolplane.SpendLine
	}{
		{toolplane.SpendByAgent, 10, []toolplane.SpendLine{{Key: "", Calls: 1, CostCents: 4}, {Key: "a1", Calls: 2, CostCents: 103}, {Key: "a2", Calls: 1, CostCents: 20}}},
		{toolplane.SpendByTool, 10, []toolplane.SpendLine{{Key: "crm.lookup", Calls: 2, CostCents: 7}, {Key: "search.web", Calls: 2, CostCents: 120}}},
		{toolplane.SpendByDay, 10, []toolplane.SpendLine{{Key: "2025-03-14", Calls: 2, CostCents: 120}, {Key: "2025-03-15", Calls: 2, CostCents: 7}}},
		{toolplane.SpendByDay, 1, []toolplane.SpendLine{{Key: "2025-03-14", Calls: 2, CostCents: 120}}},
	} {
		got, err := s.SpendReport(t.Context(), org, from, to, tt.by, tt.limit)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("SpendReport(by %s, limit %d) = %+v, %v; want %+v", tt.by, tt.limit, got, err, tt.want)
		}
	}
	if _, err := s.SpendReport(t.Context(), org, from, to, "person", 10); err == nil {
		t.Error("SpendReport by an unknown grouping answered no error")
	}
	if _, err := s.SpendReport(t.Context(), org, from, to, toolplane.SpendByDay, toolplane.MaxSpendLines+1); err == nil {
		t.Error("SpendReport past MaxSpendLines answered no error")
	}
}

// testSpendIsolation: one organization's ceiling, day counter and report
// are never another's.
func testSpendIsolation(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	if err := s.PutSpendCeiling(ctx, &toolplane.SpendCeiling{OrganizationID: orgA, DailyCents: 10, UpdatedBy: "a", UpdatedAt: base},
		spendChange(orgA, "spend_ceiling.set")); err != nil {
		t.Fatal(err)
	}
	insertUsage(t, s, spent(orgA, "u1", "agent", "search.web", base, 500))
	insertUsage(t, s, spent(orgB, "u1", "agent", "search.web", base, 7))
	wantDay(t, s, orgA, base, toolplane.DaySpend{CeilingCents: 10, SpentCents: 500, Calls: 1})
	wantDay(t, s, orgB, base, toolplane.DaySpend{SpentCents: 7, Calls: 1})
	if _, err := s.GetSpendCeiling(ctx, orgB); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("orgB reads a ceiling: %v", err)
	}
	if ok, err := s.DeleteSpendCeiling(ctx, orgB, spendChange(orgB, "spend_ceiling.delete")); ok || err != nil {
		t.Errorf("orgB deleted a ceiling: %v, %v", ok, err)
	}
	lines, err := s.SpendReport(ctx, orgB, base.Add(-time.Hour), base.Add(time.Hour), toolplane.SpendByAgent, 10)
	if err != nil || !slices.Equal(lines, []toolplane.SpendLine{{Key: "agent", Calls: 1, CostCents: 7}}) {
		t.Errorf("orgB's report = %+v, %v", lines, err)
	}
	if lines, err := s.SpendReport(ctx, newOrg(), base.Add(-time.Hour), base.Add(time.Hour), toolplane.SpendByTool, 10); err != nil || len(lines) != 0 {
		t.Errorf("a third organization's report = %+v, %v", lines, err)
	}
}
