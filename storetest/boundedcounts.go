package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// testClaimCountOfOrganization: one organization's bounded count of its
// claims in a state counts only that state and that organization, and
// stops at its bound.
func testClaimCountOfOrganization(t *testing.T, s toolplane.Store) {
	cc, ok := s.(toolplane.OrgClaimCounter)
	if !ok {
		t.Fatalf("%T does not count one organization's claims (toolplane.OrgClaimCounter)", s)
	}
	org, other := newOrg(), newOrg()
	for i, c := range []struct {
		org    string
		status toolplane.ClaimStatus
	}{
		{org, toolplane.ClaimUncertain}, {org, toolplane.ClaimUncertain}, {org, toolplane.ClaimUncertain},
		{org, toolplane.ClaimCompleted}, {other, toolplane.ClaimUncertain},
	} {
		cl := fullClaim(c.org, "payments.refund", fmt.Sprintf("k%d", i), at(time.Duration(i)*time.Second))
		cl.Status = c.status
		insertClaim(t, s, cl)
	}
	for _, c := range []struct {
		org    string
		status toolplane.ClaimStatus
		limit  int
		want   int
	}{
		{org, toolplane.ClaimUncertain, 10, 3},
		{org, toolplane.ClaimUncertain, 2, 2},
		{org, toolplane.ClaimCompleted, 10, 1},
		{org, toolplane.ClaimProcessing, 10, 0},
		{other, toolplane.ClaimUncertain, 10, 1},
		{newOrg(), toolplane.ClaimUncertain, 10, 0},
		{"org-\x00", toolplane.ClaimUncertain, 10, 0},
	} {
		got, err := cc.CountOrgClaims(t.Context(), c.org, c.status, c.limit)
		if err != nil || got != c.want {
			t.Errorf("CountOrgClaims(%q, %s, %d) = %d, %v; want %d", c.org, c.status, c.limit, got, err, c.want)
		}
	}
	if _, err := cc.CountOrgClaims(t.Context(), org, toolplane.ClaimUncertain, 0); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("CountOrgClaims with no bound = %v, want ErrInvalid", err)
	}
}

// testAnomalyCount: the bounded count of an organization's items in a
// state counts only that state and that organization, and stops at its
// bound.
func testAnomalyCount(t *testing.T, s AnomalyStore) {
	ctx, org, other := t.Context(), newOrg(), newOrg()
	for i := range 4 {
		a := newAnomaly(org, fmt.Sprintf("ano-c%d", i), fmt.Sprintf("agent-%d", i), toolplane.SignalCallRate, at(time.Duration(i)*time.Minute))
		fileAnomaly(t, s, a)
		if i == 0 {
			if ok, err := s.AcknowledgeAnomaly(ctx, org, a.ID, "ada@example.com", at(time.Hour)); !ok || err != nil {
				t.Fatalf("AcknowledgeAnomaly = %v, %v", ok, err)
			}
		}
	}
	fileAnomaly(t, s, newAnomaly(other, "ano-o", "agent-o", toolplane.SignalCallRate, at(0)))
	for _, c := range []struct {
		org    string
		status toolplane.AnomalyStatus
		limit  int
		want   int
	}{
		{org, toolplane.AnomalyOpen, 10, 3},
		{org, toolplane.AnomalyOpen, 2, 2},
		{org, toolplane.AnomalyAcknowledged, 10, 1},
		{other, toolplane.AnomalyOpen, 10, 1},
		{other, toolplane.AnomalyAcknowledged, 10, 0},
		{newOrg(), toolplane.AnomalyOpen, 10, 0},
	} {
		got, err := s.CountAnomalies(ctx, c.org, c.status, c.limit)
		if err != nil || got != c.want {
			t.Errorf("CountAnomalies(%q, %s, %d) = %d, %v; want %d", c.org, c.status, c.limit, got, err, c.want)
		}
	}
	if _, err := s.CountAnomalies(ctx, org, toolplane.AnomalyOpen, 0); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("CountAnomalies with no bound = %v, want ErrInvalid", err)
	}
}
