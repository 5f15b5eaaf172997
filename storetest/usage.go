package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var usageCases = []suiteCase{
	{"RunTreeCost", testUsageRunTreeCost},
	{"InsertDuplicate", testUsageInsertDuplicate},
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
