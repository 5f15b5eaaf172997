package toolplane

import "context"

// OrgClaimCounter is a store that counts one organization's claims in a
// state, up to a bound: what the console's navigation shows beside the
// uncertain actions, at a cost that does not grow with how many wait.
type OrgClaimCounter interface {
	// CountOrgClaims answers how many of org's claims are in status,
	// counting at most limit (a positive bound): past it, limit.
	CountOrgClaims(ctx context.Context, org string, status ClaimStatus, limit int) (int, error)
}
