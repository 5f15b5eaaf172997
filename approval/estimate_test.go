package approval_test

import (
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// Estimate and Spend answer from the caller's organization's usage rows of
// the last EstimateWindow, to those who may read approvals, and refuse
// everyone else.
func TestEstimateAndSpend(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	c := newClock()
	svc := approval.New(approval.Config{Store: s, Usage: s, Now: c.Now, TTL: ttl})
	for _, u := range []toolplane.Usage{
		{ID: "u1", OrganizationID: "org-1", RootRunID: "root", Tool: "search", CostCents: 10, CreatedAt: c.Now().Add(-time.Hour)},
		{ID: "u2", OrganizationID: "org-1", RootRunID: "root", Tool: "search", CostCents: 30, CreatedAt: c.Now().Add(-approval.EstimateWindow + time.Second)},
		{ID: "u3", OrganizationID: "org-1", RootRunID: "root", Tool: "search", CostCents: 500, CreatedAt: c.Now().Add(-approval.EstimateWindow - time.Second)},
		{ID: "u4", OrganizationID: "org-2", RootRunID: "root", Tool: "search", CostCents: 9000, CreatedAt: c.Now().Add(-time.Hour)},
	} {
		if err := s.InsertUsage(t.Context(), &u); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name      string
		by        *toolplane.Credential
		want      toolplane.UsageStats
		wantSpend int64
		refused   bool
	}{
		{"an approver", as("alice"), toolplane.UsageStats{Calls: 2, AverageCents: 20, MaxCents: 30}, 540, false},
		{"an auditor", as("eve"), toolplane.UsageStats{Calls: 2, AverageCents: 20, MaxCents: 30}, 540, false},
		{"another organization's approver", as("mallory"), toolplane.UsageStats{Calls: 1, AverageCents: 9000, MaxCents: 9000}, 9000, false},
		{"a person without the role", &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "x"}, toolplane.UsageStats{}, 0, true},
		{"no one", nil, toolplane.UsageStats{}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := svc.Estimate(t.Context(), "search", tt.by)
			if refused := errors.Is(err, toolplane.ErrForbidden) || errors.Is(err, toolplane.ErrUnauthenticated); refused != tt.refused || (!tt.refused && err != nil) {
				t.Fatalf("Estimate: %v, refused %v", err, tt.refused)
			}
			if got != tt.want {
				t.Errorf("Estimate = %+v, want %+v", got, tt.want)
			}
			spent, err := svc.Spend(t.Context(), "root", tt.by)
			if (err != nil) != tt.refused || spent != tt.wantSpend {
				t.Errorf("Spend = %d, %v; want %d, refused %v", spent, err, tt.wantSpend, tt.refused)
			}
		})
	}

	bare := approval.New(approval.Config{Store: s})
	if _, err := bare.Estimate(t.Context(), "search", as("alice")); !errors.Is(err, approval.ErrNoMeter) {
		t.Errorf("Estimate without a meter = %v, want ErrNoMeter", err)
	}
	if _, err := bare.Spend(t.Context(), "root", as("alice")); !errors.Is(err, approval.ErrNoMeter) {
		t.Errorf("Spend without a meter = %v, want ErrNoMeter", err)
	}
}
