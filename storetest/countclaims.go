package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// testClaimCountByOrganization: the count of claims in a state covers
// every organization, each under its own id, and only that state.
func testClaimCountByOrganization(t *testing.T, s toolplane.Store) {
	cc, ok := s.(toolplane.ClaimCounter)
	if !ok {
		t.Fatalf("%T does not count claims (toolplane.ClaimCounter)", s)
	}
	orgA, orgB, orgC := newOrg(), newOrg(), newOrg()
	for i, c := range []struct {
		org    string
		status toolplane.ClaimStatus
	}{
		{orgA, toolplane.ClaimUncertain}, {orgA, toolplane.ClaimUncertain}, {orgA, toolplane.ClaimCompleted},
		{orgB, toolplane.ClaimUncertain}, {orgC, toolplane.ClaimProcessing},
	} {
		cl := fullClaim(c.org, "payments.refund", fmt.Sprintf("k%d", i), at(time.Duration(i)*time.Second))
		cl.Status = c.status
		insertClaim(t, s, cl)
	}
	got, err := cc.CountClaims(t.Context(), toolplane.ClaimUncertain)
	if err != nil {
		t.Fatalf("CountClaims = %v", err)
	}
	// The store may hold other organizations' rows (a shared database):
	// judge only the three made here.
	for _, c := range []struct {
		org  string
		want int
	}{{orgA, 2}, {orgB, 1}, {orgC, 0}} {
		if got[c.org] != c.want {
			t.Errorf("uncertain in %s: %d, want %d", c.org, got[c.org], c.want)
		}
	}
	if _, listed := got[orgC]; listed {
		t.Errorf("an organization with none uncertain is listed: %v", got)
	}
	done, err := cc.CountClaims(t.Context(), toolplane.ClaimCompleted)
	if err != nil {
		t.Fatalf("CountClaims(completed) = %v", err)
	}
	if done[orgA] != 1 || done[orgB] != 0 {
		t.Errorf("completed: %v", done)
	}
}
