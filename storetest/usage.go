package storetest

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var usageCases = []suiteCase{
	{"RunTreeCost", testUsageRunTreeCost},
	{"InsertDuplicate", testUsageInsertDuplicate},
	{"ToolUsage", testToolUsage},
	{"ToolUsageBounded", testToolUsageBounded},
}

func usage(org, id, root string, cents int64) *toolplane.Usage {
	return &toolplane.Usage{
		ID:             id,
		OrganizationID: org,
		RunID:          root + "/child",
		RootRunID:      root,
		Tool:           "search.web",
		CostCents:      cents,
		Units:          3,
		CreatedAt:      base,
	}
}

func insertUsage(t *testing.T, s toolplane.Store, u *toolplane.Usage) {
	t.Helper()
	if err := s.InsertUsage(t.Context(), u); err != nil {
		t.Fatalf("InsertUsage(%s) = %v", u.ID, err)
	}
}

func wantCost(t *testing.T, s toolplane.Store, org, root string, want int64) {
	t.Helper()
	got, err := s.RunTreeCost(t.Context(), org, root)
	if err != nil || got != want {
		t.Errorf("RunTreeCost(%q) = %d, %v; want %d, nil", root, got, err, want)
	}
}

func testUsageRunTreeCost(t *testing.T, s toolplane.Store) {
	org := newOrg()
	rows := []*toolplane.Usage{
		usage(org, "u1", "root-1", 100),
		usage(org, "u2", "root-1", 250),
		usage(org, "u3", "root-1", 0),
		usage(org, "u4", "root-1", 7),
		usage(org, "u5", "root-2", 1000),
		usage(org, "u6", "root-1/child", 5000), // a run id, not this root
		usage(org, "u7", "root-3", 1<<40),      // sums past 32 bits
		usage(org, "u8", "root-3", 1<<40),
	}
	rows[1].RunID = "root-1" // the root's own calls count too
	rows[2].CreatedAt = at(time.Hour)
	for _, u := range rows {
		insertUsage(t, s, u)
	}

	tests := []struct {
		root string
		want int64
	}{
		{"root-1", 357},
		{"root-2", 1000},
		{"root-1/child", 5000},
		{"root-3", 1 << 41},
		{"root-none", 0},
		{"", 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("root %q", tt.root), func(t *testing.T) {
			wantCost(t, s, org, tt.root, tt.want)
		})
	}
}

func testUsageInsertDuplicate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	insertUsage(t, s, usage(org, "u1", "root-1", 100))
	if err := s.InsertUsage(t.Context(), usage(org, "u1", "root-1", 100)); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second InsertUsage(u1) = %v, want ErrExists", err)
	}
	wantCost(t, s, org, "root-1", 100)
}

func wantToolUsage(t *testing.T, s toolplane.Store, org, tool string, since time.Time, want toolplane.UsageStats) {
	t.Helper()
	got, err := s.ToolUsage(t.Context(), org, tool, since)
	if err != nil || got.Calls != want.Calls || math.Abs(got.AverageCents-want.AverageCents) > 1e-6 || got.MaxCents != want.MaxCents {
		t.Errorf("ToolUsage(%q, %v) = %+v, %v; want %+v, nil", tool, since, got, err, want)
	}
}

func testToolUsage(t *testing.T, s toolplane.Store) {
	org := newOrg()
	rows := []*toolplane.Usage{
		usage(org, "u1", "root-1", 100), // at since itself: counted
		usage(org, "u2", "root-2", 250),
		usage(org, "u3", "root-1", 8),
		usage(org, "u4", "root-1", 9000), // a microsecond too early
		usage(org, "u5", "root-1", 7000), // another tool
		usage(org, "u6", "root-3", 1<<40),
		usage(org, "u7", "root-3", 1<<41),
	}
	rows[1].CreatedAt = at(time.Hour)
	rows[2].CreatedAt = at(48 * time.Hour)
	rows[3].CreatedAt = at(-time.Microsecond)
	rows[4].Tool = "mail.send"
	rows[5].Tool, rows[6].Tool = "search.deep", "search.deep" // past 32 bits
	for _, u := range rows {
		insertUsage(t, s, u)
	}

	tests := []struct {
		name  string
		tool  string
		since time.Time
		want  toolplane.UsageStats
	}{
		{"since the first", "search.web", base, toolplane.UsageStats{Calls: 3, AverageCents: 358.0 / 3, MaxCents: 250}},
		{"a microsecond earlier", "search.web", at(-time.Microsecond), toolplane.UsageStats{Calls: 4, AverageCents: 9358.0 / 4, MaxCents: 9000}},
		{"the newest only", "search.web", at(2 * time.Hour), toolplane.UsageStats{Calls: 1, AverageCents: 8, MaxCents: 8}},
		{"none since", "search.web", at(72 * time.Hour), toolplane.UsageStats{}},
		{"another tool", "mail.send", base, toolplane.UsageStats{Calls: 1, AverageCents: 7000, MaxCents: 7000}},
		{"large costs", "search.deep", base, toolplane.UsageStats{Calls: 2, AverageCents: 3 << 39, MaxCents: 1 << 41}},
		{"a tool never called", "search.none", base, toolplane.UsageStats{}},
		{"no tool", "", base, toolplane.UsageStats{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantToolUsage(t, s, org, tt.tool, tt.since, tt.want)
		})
	}
}

// testToolUsageBounded: a busy tool's estimate reads its newest
// MaxUsageSample rows, never the older ones.
func testToolUsageBounded(t *testing.T, s toolplane.Store) {
	org := newOrg()
	for i := range toolplane.MaxUsageSample + 1 {
		u := usage(org, fmt.Sprintf("u%d", i), "root-1", 10)
		u.CreatedAt = at(time.Duration(i) * time.Second)
		if i == 0 {
			u.CostCents = 1_000_000 // the oldest, past the bound
		}
		insertUsage(t, s, u)
	}
	wantToolUsage(t, s, org, "search.web", base, toolplane.UsageStats{Calls: toolplane.MaxUsageSample, AverageCents: 10, MaxCents: 10})
	wantToolUsage(t, s, org, "search.web", at(time.Second), toolplane.UsageStats{Calls: toolplane.MaxUsageSample, AverageCents: 10, MaxCents: 10})
	wantToolUsage(t, s, org, "search.web", at(time.Duration(toolplane.MaxUsageSample)*time.Second), toolplane.UsageStats{Calls: 1, AverageCents: 10, MaxCents: 10})
}
