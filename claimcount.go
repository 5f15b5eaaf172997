package toolplane

import "context"

// ClaimCounter counts claims across organizations: what the metrics read
// at each scrape to show the uncertain actions open. It is apart from
// ClaimStore because only the metrics need it; both stores implement it.
type ClaimCounter interface {
	// CountClaims answers how many claims are in a state, by
	// organization; an organization with none is absent.
	CountClaims(ctx context.Context, status ClaimStatus) (map[string]int, error)
}
